package runtimekit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
)

// DefaultPatterns find issues in logs (case-insensitive), most severe
// first: the first that matches a line gives its severity.
var DefaultPatterns = []struct {
	Severity caperr.Severity
	Pattern  string
}{
	{caperr.Critical, `\b(panic|fatal)\b`},
	{caperr.High, `\b(error|exception|traceback)\b`},
}

// Issue is one log line that matched.
type Issue struct {
	Source   string          `json:"source"`
	Severity caperr.Severity `json:"severity"`
	Message  string          `json:"message"`
	Evidence string          `json:"evidence"`
}

// Limits of logs.collect.
const (
	maxIssues   = 1000
	maxLogBytes = 64 << 20
	maxLine     = 2000
	// IndexFile is what logs.collect writes in its step folder.
	IndexFile = "log-index.json"
)

func logsCollect(ctx context.Context, raw map[string]any, env *builtin.Env) (any, error) {
	var in struct {
		Sources  []string `json:"sources"`
		Patterns []string `json:"patterns"`
	}
	if err := decode(raw, &in); err != nil {
		return nil, err
	}
	type pat struct {
		sev caperr.Severity
		re  *regexp.Regexp
	}
	var pats []pat
	for i, p := range in.Patterns {
		re, err := regexp.Compile("(?i)" + p)
		if err != nil {
			return nil, caperr.New(caperr.InvalidInput, "patterns[%d] %q is not a regular expression: %v", i, p, err)
		}
		pats = append(pats, pat{caperr.High, re})
	}
	for _, d := range DefaultPatterns {
		pats = append(pats, pat{d.Severity, regexp.MustCompile("(?i)" + d.Pattern)})
	}
	reg, err := ReadRegistry(env.RunDir)
	if err != nil {
		return nil, err
	}
	issues := []Issue{}
	var sources []map[string]any
	truncated := false
	for i, src := range in.Sources {
		file := src
		for _, r := range reg.Processes {
			if r.Name == src {
				file = r.LogPath
			}
		}
		// Beneath the project or the run folder, whatever the record says
		// (processes.json lies where tools write).
		f, err := env.OpenFile(fmt.Sprintf("sources[%d]", i), file)
		if ce := (*caperr.Error)(nil); errors.As(err, &ce) {
			return nil, err
		}
		if err != nil {
			return nil, caperr.New(caperr.InvalidInput, "sources[%d] %q: %v (a server name the run started, or a file under the project or run folder)", i, src, err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		n, read := 0, 0
		for sc.Scan() {
			n++
			read += len(sc.Bytes()) + 1
			if read > maxLogBytes {
				truncated = true
				break
			}
			line := sc.Text()
			for _, p := range pats {
				if !p.re.MatchString(line) {
					continue
				}
				if len(issues) >= maxIssues {
					truncated = true
					break
				}
				msg := strings.TrimSpace(line)
				if len(msg) > maxLine {
					msg = msg[:maxLine] + "…"
				}
				issues = append(issues, Issue{Source: src, Severity: p.sev, Message: msg, Evidence: fmt.Sprintf("%s:%d: %s", file, n, msg)})
				break
			}
		}
		f.Close()
		sources = append(sources, map[string]any{"source": src, "file": file, "lines": n})
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	sortBySeverity(issues)
	if err := os.MkdirAll(env.Workdir, 0o755); err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "step folder")
	}
	index := filepath.Join(env.Workdir, IndexFile)
	b, _ := json.MarshalIndent(map[string]any{"sources": sources, "issues": issues, "truncated": truncated}, "", "  ")
	if err := os.WriteFile(index, b, 0o644); err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "log index")
	}
	env.Feedback.Info("scan", fmt.Sprintf("%d issue(s) in %d source(s)", len(issues), len(in.Sources)))
	return map[string]any{"issues": issues, "log_index_path": index, "truncated": truncated}, nil
}

// sortBySeverity puts the most severe issues first, keeping file order.
func sortBySeverity(issues []Issue) {
	sort.SliceStable(issues, func(a, b int) bool { return issues[a].Severity.Rank() < issues[b].Severity.Rank() })
}

// runFinalize writes final.json and final.md for a validation: its status
// and summary, every issue logs.collect found in this run, the artifacts.
// maxIndex bounds a log index run.finalize reads.
const maxIndex = 16 << 20

func runFinalize(ctx context.Context, raw map[string]any, env *builtin.Env) (any, error) {
	var in struct {
		Status  string `json:"status"`
		Summary string `json:"summary"`
	}
	if err := decode(raw, &in); err != nil {
		return nil, err
	}
	if env.RunDir == "" {
		return nil, caperr.New(caperr.InvalidInput, "run.finalize runs inside a run (it needs the run folder)")
	}
	var issues []Issue
	indexes, _ := filepath.Glob(filepath.Join(env.RunDir, "steps", "*", IndexFile))
	sort.Strings(indexes)
	for _, ix := range indexes {
		var doc struct {
			Issues []Issue `json:"issues"`
		}
		// Beneath its folder, bounded: a step's folder is its tool's, which
		// may have left a link, a FIFO or a device under the name.
		if b, err := beneath.ReadFile(filepath.Dir(ix), IndexFile, maxIndex, "log index"); err == nil && json.Unmarshal(b, &doc) == nil {
			issues = append(issues, doc.Issues...)
		}
	}
	sortBySeverity(issues)
	var artifacts []string
	_ = filepath.WalkDir(filepath.Join(env.RunDir, "steps"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, string(filepath.Separator)+"artifacts"+string(filepath.Separator)) {
			artifacts = append(artifacts, p)
		}
		return nil
	})
	reg, err := ReadRegistry(env.RunDir)
	if err != nil {
		env.Feedback.Warn("processes", err.Error())
		reg = &Registry{}
	}
	doc := map[string]any{"status": in.Status, "summary": in.Summary, "issues": issues, "artifacts": artifacts, "processes": reg.Processes, "written_at": now()}
	jsonPath, mdPath := filepath.Join(env.RunDir, "final.json"), filepath.Join(env.RunDir, "final.md")
	b, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "final.json")
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Validation: %s\n\n%s\n", in.Status, in.Summary)
	if len(issues) > 0 {
		md.WriteString("\n## Issues in the logs\n\n| severity | source | evidence |\n|---|---|---|\n")
		for _, is := range issues {
			fmt.Fprintf(&md, "| %s | %s | `%s` |\n", is.Severity, is.Source, strings.ReplaceAll(is.Evidence, "|", "\\|"))
		}
	} else {
		md.WriteString("\nNo issues in the collected logs.\n")
	}
	if len(artifacts) > 0 {
		md.WriteString("\n## Artifacts\n\n")
		for _, a := range artifacts {
			fmt.Fprintf(&md, "- %s\n", a)
		}
	}
	if len(reg.Processes) > 0 {
		md.WriteString("\n## Processes\n\n| name | pid | started | stopped |\n|---|---|---|---|\n")
		for _, r := range reg.Processes {
			fmt.Fprintf(&md, "| %s | %d | %s | %s %s |\n", r.Name, r.PID, r.StartedAt, r.StoppedAt, r.Stop)
		}
	}
	if err := os.WriteFile(mdPath, []byte(md.String()), 0o644); err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "final.md")
	}
	data := map[string]any{"final_markdown_path": mdPath, "final_json_path": jsonPath, "issues": len(issues)}
	if in.Status != "passed" {
		// The validation did not pass: so does this step, reports written.
		return data, caperr.New(caperr.TestFailure, "validation %s: %s (see %s)", in.Status, in.Summary, mdPath)
	}
	return data, nil
}

// inside resolves p under the project or run folder, links followed: a
// server's working folder or a scenario may not lead out of them. (A path
// handed on to a process or parser by name; files capflow reads itself
// open beneath their root: builtin.Env.OpenFile.)
func inside(env *builtin.Env, field, p string) (string, error) {
	full, err := env.Path(field, p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return full, nil // missing: the open reports it
	}
	if env.InPrivate(real) {
		return "", caperr.New(caperr.InvalidInput, "%s %q leads to another run's folder or the engine's state", field, p)
	}
	for _, base := range []string{env.Root, env.RunDir} {
		if base == "" {
			continue
		}
		rb, err := filepath.EvalSymlinks(base)
		if err == nil && (real == rb || strings.HasPrefix(real, rb+string(filepath.Separator))) {
			return real, nil
		}
	}
	return "", caperr.New(caperr.InvalidInput, "%s %q leads outside the project and the run folder", field, p)
}
