package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/projfile"
	"github.com/capflow/capflow/kits"
)

// Problem is the JSON form of one problem (docs/cli.md).
type Problem struct {
	File    string      `json:"file"`
	Line    int         `json:"line"`
	Column  int         `json:"column"`
	Field   string      `json:"field"`
	Message string      `json:"message"`
	Code    caperr.Code `json:"code"`
}

func problemsData(ps caperr.Problems) map[string]any {
	return map[string]any{"problems": problemList(ps)}
}

func problemList(ps caperr.Problems) []Problem {
	out := []Problem{}
	for _, p := range ps {
		out = append(out, Problem{File: p.File, Line: p.Line, Column: p.Column, Field: p.Field, Message: p.Message, Code: p.Code})
	}
	return out
}

func asProblems(err error, out *caperr.Problems) bool {
	if errors.As(err, out) {
		return len(*out) > 0
	}
	var ce *caperr.Error
	if errors.As(err, &ce) && ce.File != "" {
		*out = caperr.Problems{ce}
		return true
	}
	return false
}

// exitFor is the process exit status of a failure envelope: the contract
// table's, by the envelope's error code.
func exitFor(env envelope.Envelope) int {
	if env.Error == nil || !caperr.Known(env.Error.Code) {
		return 1
	}
	if n := caperr.Lookup(env.Error.Code).ExitCode; n != 0 {
		return n
	}
	return 1
}

// asError returns the *caperr.Error err carries, or wraps err in one.
func asError(err error) *caperr.Error { return caperr.As(err, caperr.InternalError) }

func relTo(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// sourceLine returns line n of a problem's file, for quoting.
func sourceLine(root, file string, n int) (string, bool) {
	if n <= 0 || file == "" {
		return "", false
	}
	var b []byte
	var err error
	if rest, ok := strings.CutPrefix(file, "builtin:"); ok {
		b, err = fs.ReadFile(kits.Builtin(), rest)
	} else {
		// A relative name is the one typed (from the working folder), or
		// one of the project's (from its root).
		p := file
		if !filepath.IsAbs(p) {
			if _, err := os.Lstat(p); err == nil {
				p, _ = filepath.Abs(p)
			} else {
				p = filepath.Join(root, p)
			}
		}
		// Beneath its own folder, bounded: a file that is a link out of it
		// is not quoted (its bytes could be anything of the machine's).
		b, err = projfile.ReadIn(filepath.Dir(p), p, file)
	}
	if err != nil {
		return "", false
	}
	lines := strings.Split(string(b), "\n")
	if n > len(lines) {
		return "", false
	}
	return strings.TrimRight(lines[n-1], "\r"), true
}

// printProblems renders problems with the offending line quoted and a
// caret under the column, like a compiler.
func printProblems(w io.Writer, root string, ps []Problem) {
	scr := screenOf(w)
	for _, p := range ps {
		loc := p.File
		if p.Line > 0 {
			loc = fmt.Sprintf("%s:%d", p.File, p.Line)
			if p.Column > 0 {
				loc += fmt.Sprintf(":%d", p.Column)
			}
		}
		field := ""
		if p.Field != "" {
			field = p.Field + ": "
		}
		fmt.Fprintf(w, "  %s %s: %s%s\n", scr.paint(red, "✗"), scr.paint(bold, printable(loc)), printable(field), printableText(p.Message))
		if src, ok := sourceLine(root, p.File, p.Line); ok {
			fmt.Fprintf(w, "      %4d | %s\n", p.Line, printable(src))
			if p.Column > 0 && p.Column <= len(src)+1 {
				fmt.Fprintf(w, "           | %s%s\n", strings.Repeat(" ", p.Column-1), scr.paint(red, "^"))
			}
		}
	}
}

func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = printable(c) // a tool's words among them
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// tableOr is table, or what empty says when there are no rows: a bare
// header reads as a fault.
func tableOr(w io.Writer, empty string, header []string, rows [][]string) {
	if len(rows) == 0 {
		fmt.Fprintln(w, empty)
		return
	}
	table(w, header, rows)
}

// prettyEnvelope is the default rendering: message, then feedback.
func prettyEnvelope(w io.Writer, env envelope.Envelope) {
	scr := screenOf(w)
	mark := scr.paint(green, "✓")
	if !env.Success {
		mark = scr.paint(red, "✗")
	}
	fmt.Fprintf(w, "%s %s\n", mark, printableText(env.Message))
	for _, f := range env.Feedback {
		// Each error once: the headline already says what its result
		// feedback says.
		if f.Level == envelope.LevelInfo && env.Success || strings.Contains(env.Message, f.Message) && (f.Detail == "" || caperr.Known(caperr.Code(f.Detail))) {
			continue
		}
		fmt.Fprintf(w, "  [%s] %s: %s\n", printable(f.Level), printable(f.Phase), printable(f.Message))
		if f.Detail != "" && !caperr.Known(caperr.Code(f.Detail)) {
			for _, l := range strings.Split(f.Detail, "\n") {
				fmt.Fprintf(w, "      %s\n", printable(l))
			}
		}
	}
	if env.Error != nil {
		sev := env.Error.Severity
		if sev == "" {
			sev = caperr.Lookup(env.Error.Code).Severity
		}
		fmt.Fprintf(w, "  error: %s (severity %s)\n", env.Error.Code, sev)
	}
}

// prettyData prints a result's data under its headline: a field a line,
// each value as JSON cut at 200 bytes (--output json has it whole).
func prettyData(w io.Writer, data any) {
	m, ok := data.(map[string]any)
	if !ok {
		if data != nil {
			fmt.Fprintf(w, "  %s\n", shortJSON(data))
		}
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(w, "  %s: %s\n", k, shortJSON(m[k]))
	}
}

// shortJSON is v as JSON, cut at 200 bytes: a line of a person's output.
func shortJSON(v any) string {
	js, _ := json.Marshal(v)
	if len(js) > 200 {
		return string(js[:200]) + "…"
	}
	return string(js)
}

// checkOutputPath refuses an --output-path the envelope could not be
// written to, before the command runs: a symbolic link (it may lead
// anywhere: the file it names would be overwritten), anything but a
// regular file, a folder that does not exist or cannot be written.
func checkOutputPath(p string) error {
	st, err := os.Lstat(p)
	switch {
	case err == nil && st.Mode()&os.ModeSymlink != 0:
		return errors.New("is a symbolic link: refused (name the file itself)")
	case err == nil && !st.Mode().IsRegular():
		return fmt.Errorf("is not a regular file (%s)", st.Mode().Type())
	case err == nil:
		f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("cannot be written: %w", errors.Unwrap(err))
		}
		return f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot be written: %w", errors.Unwrap(err))
	}
	dir := filepath.Dir(p)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("cannot be written: its folder %s does not exist", dir)
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return fmt.Errorf("cannot be written: its folder %s is not writable", dir)
	}
	return nil
}

// writeOutputPath writes the envelope file: a regular file only (opening
// a FIFO nobody reads would block forever), never through a link.
func writeOutputPath(p string, b []byte) error {
	if st, err := os.Lstat(p); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// emit prints the result and returns the exit code (the envelope's). Only
// the first call prints: one envelope per process.
func (a *App) emit(r *result) (code int) {
	code = -1
	a.emitted.Do(func() { code = a.print(r) })
	if code < 0 {
		// The safety net already answered; it exits the process.
		select {}
	}
	return code
}

func (a *App) print(r *result) int {
	if _, err := json.Marshal(r.env); err != nil {
		// Data JSON cannot carry (NaN, ±Inf) would leave stdout empty:
		// the envelope says so instead.
		id := r.env.ToolID
		r = &result{env: envelope.NewBuilder(id).Fail(caperr.InvalidInput, "the result cannot be written as JSON: "+err.Error(), nil)}
	}
	code := r.env.ExitCode
	if r.exit != nil {
		code = *r.exit
	}
	if a.outputPath != "" && !a.outputPathBad {
		b, _ := json.MarshalIndent(r.env, "", "  ")
		if err := writeOutputPath(a.outputPath, append(b, '\n')); err != nil {
			// Checked before the command ran, so this is rare (the disk
			// filled, the folder went): the printed envelope says it too.
			msg := fmt.Sprintf("cannot write --output-path %s: %v", a.outputPath, err)
			fmt.Fprintf(a.Stderr, "capflow: %s\n", msg)
			if code == 0 {
				code = 1
			}
			r.env.ExitCode, r.env.Success = code, false
			r.env.Feedback = append(r.env.Feedback, envelope.Feedback{Phase: "output", Level: envelope.LevelError, Message: msg, Timestamp: envelope.Timestamp(envelope.Now())})
			if r.env.Error == nil {
				r.env.Error = &envelope.ErrorInfo{Code: caperr.ObservabilityError, Severity: caperr.High}
			}
		}
	}
	if a.jsonOutput() {
		b, _ := json.Marshal(r.env)
		fmt.Fprintln(a.Stdout, string(b))
	} else if r.pretty != nil {
		r.pretty(a.Stdout)
	} else {
		prettyEnvelope(a.Stdout, r.env)
	}
	return code
}
