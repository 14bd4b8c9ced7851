package toolrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// process is one run of a command tool's process group.
type process struct {
	argv      []string
	env       []string
	dir       string
	stdin     *os.File
	stdout    *capped
	stderrLog io.Writer
	red       *envelope.Redactor
	log       hclog.Logger
	grace     time.Duration
	// ioWait is how long its output may stay open after it exited (held
	// by a child it left): ioGrace, or less for an inline step.
	ioWait  time.Duration
	workdir string
	// wd is workdir's handle, taken before the tool starts: its result is
	// read beneath it (openOutput).
	wd *os.File
	// box confines the tool (nil: unconfined) with support's means.
	box     *sandbox.Request
	support *sandbox.Support
	// folders are the write folders opened for this run alone; given the
	// files its inputs name, opened for it.
	folders sandbox.Folders
	given   sandbox.GivenFiles
	// What the run came to.
	exit    int
	waitErr error
	elapsed time.Duration
	events  eventLog
	detail  string // the stderr tail
	// stderrBytes is how much the tool wrote to stderr, lines and events.
	stderrBytes int64
	stopped     bool // stopped by cancellation or timeout
	breach      *sandbox.Breach
	// refusals are the connections the egress proxy refused the tree
	// (the first few), told in its feedback.
	refMu    sync.Mutex
	refusals []envelope.Feedback
}

// maxRefusals bounds the refusals a step's feedback tells.
const maxRefusals = 5

// refused notes a connection the egress proxy refused the tool.
func (p *process) refused(err error) {
	p.refMu.Lock()
	defer p.refMu.Unlock()
	if len(p.refusals) < maxRefusals {
		p.refusals = append(p.refusals, envelope.Feedback{Phase: "network", Level: envelope.LevelWarning,
			Timestamp: envelope.Timestamp(envelope.Now()), Message: "capflow refused a connection: " + err.Error()})
	}
}

// run starts the process and waits for it and its stderr. failed is set
// (with the envelope) when it could not start.
func (p *process) run(ctx context.Context, req Request, b *envelope.Builder) (envelope.Envelope, bool) {
	// stderr goes through a pipe of our own and stdout through exec's copy
	// bounded by WaitDelay: a tool that leaves a child (say, started with
	// setsid) holding either open must not keep the step waiting forever.
	errR, errW, err := os.Pipe()
	if err != nil {
		return b.Fail(caperr.StartupError, err.Error(), nil), true
	}
	defer errR.Close()
	start := time.Now()
	proc, tree, err := p.start(errW)
	errW.Close()
	if err != nil {
		b.Error("start", "cannot start "+p.argv[0], err.Error())
		return b.Fail(caperr.StartupError, fmt.Sprintf("cannot start %s: %v", req.Manifest.Name, err), nil), true
	}
	how := ""
	if tree != nil {
		how = ", confined"
		// Which way, in every envelope of the attempt (the tool's own too).
		p.events.add(envelope.Feedback{Phase: "sandbox", Level: envelope.LevelInfo, Timestamp: envelope.Timestamp(envelope.Now()),
			Message: SandboxWayPrefix + tree.Way()})
	}
	b.Info("start", fmt.Sprintf("started %s (pid %d%s)", filepath.Base(p.argv[0]), proc.pid, how))
	done := make(chan struct{})
	var stopped atomic.Bool
	go p.stopOnCancel(ctx, proc.pid, tree, done, &stopped)
	var evMu sync.Mutex
	tail := &tailBuffer{max: stderrTail}
	readDone := make(chan struct{})
	stderr := &counted{r: errR}
	go func() {
		defer close(readDone)
		readStderr(stderr, p.stderrLog, p.red, tail, func(f envelope.Feedback) {
			evMu.Lock()
			p.events.add(f)
			evMu.Unlock()
			if req.OnFeedback != nil {
				req.OnFeedback(f)
			}
		}, req.OnStderr, p.log)
	}()
	exit, waitErr := proc.wait()
	p.waitErr = waitErr
	close(done)
	select {
	case <-readDone:
	case <-time.After(p.ioWait):
		// Someone outside the tool's process group still holds stderr.
		p.log.Warn("tool's stderr still open after it exited; not waiting for it")
		errR.Close()
		<-readDone
	}
	evMu.Lock()
	defer evMu.Unlock()
	p.elapsed, p.exit, p.detail, p.stopped = time.Since(start), exit, tail.String(), stopped.Load()
	p.stderrBytes = stderr.n // read after readDone closed
	if tree != nil {
		p.breach = tree.Finish(p.exit, p.detail)
	}
	return envelope.Envelope{}, false
}

// SandboxWayPrefix begins the feedback that says how a confined step was
// confined: "confined by zygote", "confined by bubblewrap (why)".
const SandboxWayPrefix = "confined by "

// started is a started tool: its outermost process, and how to wait for
// it (its exit status as exec.Cmd's ExitCode, and Wait's error).
type started struct {
	pid  int
	wait func() (int, error)
}

// startedCmd is an unconfined tool's.
func startedCmd(cmd *exec.Cmd) started {
	return started{cmd.Process.Pid, func() (int, error) {
		err := cmd.Wait()
		return cmd.ProcessState.ExitCode(), err
	}}
}

// start starts the tool, confined when p.box says so (tree set).
func (p *process) start(stderr *os.File) (started, *sandbox.Tree, error) {
	setup := func(cmd *exec.Cmd) {
		cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.WaitDelay = p.stdin, p.stdout, stderr, p.ioWait
	}
	// A missing program is found here, as exec would (inside the sandbox
	// it would be only an exit status).
	prog, err := lookPath(p.argv[0])
	if err != nil {
		return started{}, nil, err
	}
	if p.box == nil {
		cmd, err := p.startAt(prog, setup)
		if errors.Is(err, fs.ErrNotExist) && prog != p.argv[0] {
			// Gone since it was looked up: look again.
			forgetPath(p.argv[0])
			if prog, err = lookPath(p.argv[0]); err == nil {
				cmd, err = p.startAt(prog, setup)
			}
		}
		if err != nil {
			return started{}, nil, err
		}
		return startedCmd(cmd), nil, nil
	}
	if _, err := os.Stat(prog); err != nil && prog != p.argv[0] {
		// Gone since it was looked up: inside the sandbox it would be only
		// an exit status.
		forgetPath(p.argv[0])
		if _, err := lookPath(p.argv[0]); err != nil {
			return started{}, nil, err
		}
	}
	tree, err := p.support.Start(*p.box, sandbox.Stdio{In: p.stdin, Out: p.stdout, Err: stderr, WaitDelay: p.ioWait})
	if err != nil {
		return started{}, nil, err
	}
	return started{tree.Pid(), tree.Wait}, tree, nil
}

// startAt starts the tool unconfined from the program at prog.
func (p *process) startAt(prog string, setup func(*exec.Cmd)) (*exec.Cmd, error) {
	return startRetrying(func() *exec.Cmd {
		cmd := exec.Command(prog, p.argv[1:]...)
		cmd.Args[0] = p.argv[0]
		cmd.Dir, cmd.Env, cmd.SysProcAttr = p.dir, p.env, procAttr()
		setup(cmd)
		return cmd
	})
}

// stopOnCancel stops the whole process group (or confined tree) when
// ctx ends: SIGTERM, then SIGKILL after the grace period.
func (p *process) stopOnCancel(ctx context.Context, pgid int, tree *sandbox.Tree, done <-chan struct{}, stopped *atomic.Bool) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	stopped.Store(true)
	grace := p.grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	if tree != nil {
		tree.Terminate(grace, done)
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		p.log.Warn("tool ignored SIGTERM; killing its process group", "pid", pgid)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// result reads the envelope of a process that ended (outcome), with the
// tail of its stderr as a feedback entry of its own when it failed, however
// it failed: what a person reads first ("what next") on every path.
func (p *process) result(ctx context.Context, m *manifest.Manifest, b *envelope.Builder, maxOut int64) envelope.Envelope {
	env := p.outcome(ctx, m, b, maxOut)
	if !env.Success && p.detail != "" {
		env.Feedback = append(env.Feedback, envelope.Feedback{Phase: "stderr", Level: envelope.LevelInfo, Message: "stderr tail", Detail: p.detail, Timestamp: envelope.Timestamp(envelope.Now())})
	}
	return env
}

// outcome reads the envelope of a process that ended: from its exit code
// (result: exit_code), its output file, or its stdout.
func (p *process) outcome(ctx context.Context, m *manifest.Manifest, b *envelope.Builder, maxOut int64) envelope.Envelope {
	p.refMu.Lock()
	for _, f := range p.refusals {
		p.events.add(f)
	}
	p.refusals = nil
	p.refMu.Unlock()
	if p.stopped || ctx.Err() != nil {
		code := ctxCode(ctx)
		b.Append(p.events.list()...)
		b.Error("stop", fmt.Sprintf("%s stopped after %s (%s)", m.Name, p.elapsed.Round(time.Millisecond), strings.ToLower(string(code))), "")
		return b.Fail(code, fmt.Sprintf("%s was stopped: %s", m.Name, ctxMessage(code)), nil)
	}
	if p.breach != nil {
		b.Append(p.events.list()...)
		why := fmt.Sprintf("%s %s", m.Name, p.breach.Error())
		b.Error("sandbox", why, "")
		return b.FailWithExit(caperr.ResourceExhausted, nonzero(p.exit), why, nil)
	}
	if p.stdout.dropped > 0 {
		p.events.add(envelope.Feedback{Phase: "output", Level: envelope.LevelWarning, Timestamp: envelope.Timestamp(envelope.Now()),
			Message: fmt.Sprintf("stdout exceeded %d bytes; %d bytes dropped", maxOut, p.stdout.dropped)})
	}
	exit := p.exit
	if m.Entrypoint.Result == manifest.ResultExitCode {
		b.Append(p.events.list()...)
		data := map[string]any{"exit_code": exit, "stdout": lastBytes(p.stdout.masked(p.red), 64<<10)}
		if exit == 0 {
			return b.Succeed(fmt.Sprintf("%s exited 0", m.Name), data)
		}
		b.Error("exit", fmt.Sprintf("%s exited %d", m.Name, exit), "")
		return b.FailWithExit(caperr.ToolFailure, exit, fmt.Sprintf("%s exited %d", m.Name, exit), data)
	}
	raw, source, read, rerr := readResult(p.wd, p.stdout.buf.Bytes(), maxOut)
	if rerr != nil {
		return p.broken(b, rerr.Error())
	}
	if read != nil {
		defer read.Close()
	}
	if source == OutputFile && !p.red.Empty() {
		// The tool's own file stays in the step folder for debugging:
		// masked, like everything else capflow keeps.
		rewriteOutput(p.wd, read, p.red.Bytes(raw))
	}
	if raw == nil {
		why := fmt.Sprintf("%s exited %d without a result envelope (no %s, no JSON object on stdout)", m.Name, exit, OutputFile)
		if p.stdout.buf.Len() == 0 && p.stderrBytes == 0 {
			// A plain script that just failed: say what it did, not the protocol's words.
			why = fmt.Sprintf("%s exited %d and wrote nothing to stdout or stderr (no result envelope)", m.Name, exit)
		}
		if out := p.stdout.buf.Bytes(); bytes.Contains(out, []byte(`"toolId"`)) {
			// One was printed, but not last: say what came after it.
			why = fmt.Sprintf("%s exited %d, but its stdout does not end with its result envelope: it ends with %q (%s in its step folder); the envelope must be the last thing on stdout, or write it to $CAPFLOW_OUTPUT_PATH",
				m.Name, exit, p.red.Cut(lastLine(out)), StdoutLog)
			if err := brokenEnvelope(out); err != nil {
				why = fmt.Sprintf("%s exited %d, but the result envelope it ends its stdout with is not valid JSON (%v): it ends with %q", m.Name, exit, err, p.red.Cut(lastLine(out)))
			}
		}
		if p.waitErr != nil && exit < 0 {
			why = fmt.Sprintf("%s died (%v) without a result envelope", m.Name, p.waitErr)
		}
		env := p.broken(b, why)
		if exit == 0 {
			// It ended well but does not speak the tool protocol: another
			// attempt would do the same (a crash, exit non-zero, may not).
			env.Error.Retryable = false
		}
		return env
	}
	env, perr := decodeEnvelope(raw)
	if perr != nil {
		return p.broken(b, fmt.Sprintf("%s wrote an invalid envelope to %s: %v", m.Name, source, perr))
	}
	if env.Success && exit != 0 {
		b.Append(env.Feedback...)
		why := fmt.Sprintf("%s exited %d but its envelope says success", m.Name, exit)
		b.Error("result", why, "")
		return b.FailWithExit(caperr.ToolFailure, exit, why, env.Data)
	}
	return p.tools(env)
}

// broken fails a process that gave no usable envelope.
func (p *process) broken(b *envelope.Builder, why string) envelope.Envelope {
	b.Append(p.events.list()...)
	b.Error("result", why, "")
	return b.FailWithExit(caperr.ToolFailure, nonzero(p.exit), why, nil)
}

// tools completes the tool's own envelope: its feedback with the stderr
// events it does not hold, a known error code, its duration.
func (p *process) tools(env *envelope.Envelope) envelope.Envelope {
	env.Feedback = mergeFeedback(env.Feedback, p.events.list())
	if !env.Success {
		knownCode(env)
	}
	if env.DurationMS == 0 {
		env.DurationMS = p.elapsed.Milliseconds()
	}
	return *env
}

// lastLine is b's last line that is not blank, its first 80 bytes.
func lastLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(b[:min(len(b), 80)])
}

// counted counts what is read through it.
type counted struct {
	r io.Reader
	n int64
}

func (c *counted) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
