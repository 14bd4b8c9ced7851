package mcpclient

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capflow/capflow/internal/jsonlines"
)

// stdioTransport is the SDK's CommandTransport but for one thing: each
// line the server writes must be one whole JSON value. The SDK decodes a
// stream, so an answer cut short and then a newline kept the call waiting
// for the rest (the step held until its timeout), and the next message
// broke the session shared by every step on that server (the hostile
// audit's M8). Here such a line ends the session at once, marked as an
// answer out of contract.
type stdioTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration
	// bad is set when the server wrote a line that is no JSON value.
	bad *atomic.Bool
}

// maxLine bounds one line of a server (the SDK's own bound).
const maxLine = mcp.DefaultMaxLineLength

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A grandchild that keeps stderr open must not keep Wait (and the
	// session's end) waiting.
	t.cmd.WaitDelay = t.terminate
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	r := jsonlines.New(stdout, maxLine, func(f jsonlines.Fault) error {
		t.bad.Store(true)
		return fmt.Errorf("the server wrote %s", f.Reason)
	})
	// A bad answer to one call fails that call alone (hostile findings at
	// 6003afe, 14): the others on the session go on.
	r.Answer = true
	w := &stdin2{WriteCloser: stdin, cmd: t.cmd, terminate: t.terminate}
	return (&mcp.IOTransport{Reader: io.NopCloser(r), Writer: w}).Connect(ctx)
}

// stdin2 closes the server the way the SDK's CommandTransport does: stdin
// first, then SIGTERM, then SIGKILL, each after terminate.
type stdin2 struct {
	io.WriteCloser
	cmd       *exec.Cmd
	terminate time.Duration
}

func (s *stdin2) Close() error {
	_ = s.WriteCloser.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			_ = signalGroup(s.cmd, sig)
		}
		select {
		case err := <-done:
			return err
		case <-time.After(s.terminate):
		}
	}
	return fmt.Errorf("the MCP server (pid %d) does not exit", s.cmd.Process.Pid)
}
