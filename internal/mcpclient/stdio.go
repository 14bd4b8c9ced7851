package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

var errNotJSON = errors.New("the server wrote a line that is not one whole JSON value")

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	r := &lines{r: bufio.NewReaderSize(stdout, 64<<10), bad: t.bad}
	w := &stdin2{WriteCloser: stdin, cmd: t.cmd, terminate: t.terminate}
	return (&mcp.IOTransport{Reader: io.NopCloser(r), Writer: w}).Connect(ctx)
}

// lines hands on the server's output a whole line at a time, each checked
// to be a JSON value (blank lines pass).
type lines struct {
	r    *bufio.Reader
	bad  *atomic.Bool
	left []byte
}

func (l *lines) Read(p []byte) (int, error) {
	for len(l.left) == 0 {
		line, err := l.readLine()
		if len(line) > 0 {
			if t := bytes.TrimSpace(line); len(t) > 0 && !json.Valid(t) {
				l.bad.Store(true)
				return 0, errNotJSON
			}
			l.left = line
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := copy(p, l.left)
	l.left = l.left[n:]
	return n, nil
}

// readLine reads up to and with the next newline (the last line of the
// stream may lack it), refusing one past maxLine.
func (l *lines) readLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := l.r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxLine {
			l.bad.Store(true)
			return nil, fmt.Errorf("the server wrote a line of more than %d bytes", maxLine)
		}
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
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
			_ = s.cmd.Process.Signal(sig)
		}
		select {
		case err := <-done:
			return err
		case <-time.After(s.terminate):
		}
	}
	return fmt.Errorf("the MCP server (pid %d) does not exit", s.cmd.Process.Pid)
}
