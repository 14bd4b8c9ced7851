package toolrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/realpath"
)

// Files a command tool's step folder holds.
const (
	InputFile  = "input.json"
	OutputFile = "output.json"
	StdoutLog  = "stdout.log"
	StderrLog  = "stderr.log"
)

// baseEnv are the worker variables a tool inherits; everything else
// (tokens, credentials) must be declared as a secret or env dependency.
var baseEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH", "GOCACHE", "GOPATH"}

const stderrTail = 4 << 10

// ioGrace is how long a finished tool's output pipes may stay open (held
// by a child it left behind) before capflow stops reading them.
const ioGrace = 2 * time.Second

// resolveArgv makes relative paths in argv absolute against the tool's
// folder: argv[0] when it contains a slash, and any later element that
// names an existing file there. Bare program names go through PATH.
func resolveArgv(m *manifest.Manifest) []string {
	argv := append([]string(nil), m.Entrypoint.Command...)
	for i, a := range argv {
		if filepath.IsAbs(a) || m.Dir == "" {
			continue
		}
		cand := filepath.Join(m.Dir, a)
		if i == 0 && strings.Contains(a, "/") {
			argv[i] = cand
			continue
		}
		if i > 0 {
			if st, err := os.Stat(cand); err == nil && !st.IsDir() {
				argv[i] = cand
			}
		}
	}
	return argv
}

// startRetrying starts a command, again when the kernel says its file is
// busy: a script written moments ago (by an earlier step, say) stays
// "busy" while any process forked meanwhile still holds its write handle,
// a race every program that writes and runs executables can meet.
func startRetrying(mk func() *exec.Cmd) (*exec.Cmd, error) {
	for attempt := 1; ; attempt++ {
		cmd := mk()
		err := cmd.Start()
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == 10 {
			return cmd, err
		}
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
	}
}

func (r *Runner) runCommand(ctx context.Context, req Request, b *envelope.Builder, red *envelope.Redactor, log hclog.Logger) envelope.Envelope {
	// Each folder where it really is, as the sandbox binds it: a project
	// reached through a link (`cd ~/proj`, ~/proj a link) left the tool an
	// empty working folder, or one bubblewrap could not bind (found
	// attacking).
	req.Root, req.RunDir, req.Workdir, req.Records = realpath.Of(req.Root), realpath.Of(req.RunDir), realpath.Of(req.Workdir), realpath.Of(req.Records)
	m := *req.Manifest // the tool's folder too, for its command and CAPFLOW_TOOL_DIR
	m.Dir = realpath.Of(m.Dir)
	req.Manifest = &m
	wd := req.Workdir
	if wd == "" {
		tmp, err := os.MkdirTemp("", "capflow-step-")
		if err != nil {
			return b.Fail(caperr.ObservabilityError, "cannot create a step folder: "+err.Error(), nil)
		}
		defer os.RemoveAll(tmp)
		wd = tmp
	}
	inJSON, _ := json.Marshal(req.Inputs)
	recDir := req.Records
	if recDir == "" {
		recDir = wd
	}
	inPath, outPath := filepath.Join(recDir, InputFile), filepath.Join(wd, OutputFile)
	// The step folder's handle, taken once: the result is read beneath it.
	wdh, err := openDir(wd)
	if err != nil {
		return b.Fail(caperr.ObservabilityError, "cannot open the step folder: "+err.Error(), nil)
	}
	defer wdh.Close()
	// A previous attempt's result must not count for this one (a file, or
	// an empty folder it left there).
	if err := unix.Unlinkat(int(wdh.Fd()), OutputFile, 0); errors.Is(err, unix.EISDIR) {
		_ = unix.Unlinkat(int(wdh.Fd()), OutputFile, unix.AT_REMOVEDIR)
	}
	stdin, err := writeInputIn(wdh, req.Records, inJSON)
	if err != nil {
		return b.Fail(caperr.ObservabilityError, "cannot write the input file: "+err.Error(), nil)
	}
	defer stdin.Close()
	maxOut := r.MaxStdout
	if maxOut <= 0 {
		maxOut = 8 << 20
	}
	// Logs are created at the first byte: most tools write nothing there,
	// and a file's creation is a fast step's largest cost after the fork.
	// An earlier attempt's are removed so they never pass for this one's.
	stdoutLog, stderrLog := newLogFile(wdh, StdoutLog), newLogFile(wdh, StderrLog)
	defer stderrLog.Close()
	// stdout is kept in memory (capped) and logged redacted at the end, so
	// a secret split across two writes is still masked.
	stdout := &capped{max: maxOut}
	defer func() {
		if stdout.buf.Len() > 0 {
			_, _ = stdoutLog.Write(stdout.masked(red))
		}
		_ = stdoutLog.Close()
	}()
	p := &process{argv: resolveArgv(req.Manifest), env: toolEnv(req, inPath, outPath, wd), stdin: stdin, stdout: stdout,
		stderrLog: stderrLog, red: red, log: log, grace: r.Grace, ioWait: ioGrace, workdir: wd, wd: wdh}
	p.dir = req.Root
	if p.dir == "" {
		p.dir = wd
	}
	if req.Budget > 0 {
		// Past its budget the tool is killed, not asked to stop: its step
		// runs again elsewhere (an inline step, as a local activity).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Budget)
		defer cancel()
		p.grace, p.ioWait = time.Millisecond, 10*time.Millisecond
	}
	warning, err := r.confine(req, p)
	defer p.folders.Close()
	defer p.given.Close()
	if err != nil {
		b.Error("sandbox", "cannot confine the tool", err.Error())
		return b.FailErr(err, nil)
	}
	if warning != "" {
		p.events.add(unconfinedNote(warning))
	}
	if env, failed := p.run(ctx, req, b); failed {
		return env
	}
	return p.result(ctx, req.Manifest, b, maxOut)
}

func ctxMessage(c caperr.Code) string {
	if c == caperr.TaskTimeout {
		return "timed out"
	}
	return "cancelled"
}

func nonzero(exit int) int {
	if exit == 0 {
		return 1
	}
	if exit < 0 {
		return 137
	}
	return exit
}

func toolEnv(req Request, inPath, outPath, wd string) []string {
	m := req.Manifest
	var env []string
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, d := range m.Dependencies {
		if d.Kind == manifest.DepEnv {
			if v, ok := os.LookupEnv(d.Name); ok {
				env = append(env, d.Name+"="+v)
			}
		}
	}
	env = append(env, passEnv(m.Entrypoint.PassEnv, os.Environ())...)
	for k, v := range m.Entrypoint.Env {
		env = append(env, k+"="+v)
	}
	for k, v := range req.Secrets {
		env = append(env, k+"="+v)
	}
	attempt := req.Attempt
	if attempt == 0 {
		attempt = 1
	}
	env = append(env,
		"CAPFLOW_INPUT_PATH="+inPath,
		"CAPFLOW_OUTPUT_PATH="+outPath,
		"CAPFLOW_RUN_ID="+req.RunID,
		"CAPFLOW_STEP_ID="+req.StepID,
		"CAPFLOW_ATTEMPT="+strconv.Itoa(attempt),
		"CAPFLOW_WORKDIR="+wd,
		"CAPFLOW_TOOL_DIR="+m.Dir,
		"TOOLS_OUTPUT_JSON=1",
	)
	return env
}

// lastBytes is b's last n bytes, from a character's start: where b was
// not masked yet, mask what it returns with Redactor.CutFront, which
// masks what the cut left of a secret at its start too.
func lastBytes(b []byte, n int) string {
	if len(b) > n {
		i := len(b) - n
		for k := 0; k < utf8.UTFMax-1 && i < len(b) && !utf8.RuneStart(b[i]); k++ {
			i++ // past a character's continuation bytes (binary stays binary)
		}
		b = b[i:]
	}
	return string(b)
}

// capped keeps up to max bytes in memory and counts the rest.
type capped struct {
	max     int64
	buf     bytes.Buffer
	dropped int64
	mask    []byte // masked's answer, until the next write
}

// masked is what was kept, masked: where the cap cut it, the start of a
// secret the cut left at its end is masked too (Redactor.Cut). Masked
// once: a failed step's data and its stdout.log both show it.
func (c *capped) masked(red *envelope.Redactor) []byte {
	switch {
	case c.mask != nil:
	case c.dropped > 0:
		c.mask = []byte(red.Cut(c.buf.String()))
	default:
		c.mask = red.Bytes(c.buf.Bytes())
	}
	return c.mask
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - int64(c.buf.Len())
	keep := p
	c.mask = nil
	if int64(len(p)) > room {
		if room < 0 {
			room = 0
		}
		keep = p[:room]
		c.dropped += int64(len(p)) - room
	}
	c.buf.Write(keep)
	return len(p), nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
}

func (t *tailBuffer) String() string { return strings.TrimSpace(string(t.b)) }

// passEnv picks the variables a manifest's pass_env names (NAME, or
// PREFIX_* for every variable that starts so) from an environment.
func passEnv(names, environ []string) []string {
	if len(names) == 0 {
		return nil
	}
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		for _, n := range names {
			if p, ok := strings.CutSuffix(n, "*"); (ok && strings.HasPrefix(k, p)) || k == n {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}
