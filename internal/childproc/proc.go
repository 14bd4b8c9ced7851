package childproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// child is one evaluator process, used by one evaluation at a time.
type child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *head
}

func start(name string, memory int64) (*child, error) {
	self, err := executable()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := &exec.Cmd{Path: self, Args: []string{name, strconv.FormatInt(memory, 10)}}
	// No environment but one thread for Go code: an evaluation has no use
	// for the host's variables (jq's $ENV is empty), and every thread's
	// stack counts against the address-space cap.
	cmd.Env = []string{"GOMAXPROCS=1"}
	cmd.SysProcAttr = procAttr()
	c := &child{cmd: cmd, stderr: &head{max: 4096}}
	cmd.Stderr = c.stderr
	if c.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := spawn(cmd.Start); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.out = bufio.NewReader(out)
	return c, nil
}

// spawns carries starts to the spawner: one goroutine, locked to its OS
// thread for the life of the process, that starts every child. A child's
// Pdeathsig fires when the thread that forked it exits, not the process,
// and Go ends a locked thread when its goroutine returns (the sandbox's
// do): children forked there were killed at random (found attacking
// issue 57).
var (
	spawns    = make(chan func())
	spawnOnce sync.Once
)

// spawn runs start on the spawner's thread.
func spawn(start func() error) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread()
			for f := range spawns {
				f()
			}
		}()
	})
	done := make(chan error, 1)
	spawns <- func() { done <- start() }
	return <-done
}

// do sends one request and reads its answer, or gives up when ctx ends.
func (c *child) do(ctx context.Context, req []byte, maxAnswer uint64) ([]byte, error) {
	type answer struct {
		b   []byte
		err error
	}
	done := make(chan answer, 1)
	go func() {
		if err := writeFrame(c.in, req); err != nil {
			done <- answer{err: err}
			return
		}
		b, err := readFrame(c.out, maxAnswer)
		done <- answer{b, err}
	}()
	select {
	case <-ctx.Done():
		c.kill()
		<-done
		return nil, context.Cause(ctx)
	case a := <-done:
		if a.err == ErrTooLarge {
			return nil, ErrTooLarge
		}
		if a.err != nil {
			return nil, c.died()
		}
		return a.b, nil
	}
}

// died explains a child that stopped answering. Under the address-space
// cap the runtime dies in one of several ways when a mapping is refused
// (out of memory, a thread it cannot create, a fault in the collector, the
// race detector's shadow memory); a Go panic ("panic: ...") is a bug, not
// the budget.
func (c *child) died() error {
	c.kill()
	msg := c.stderr.String()
	if !strings.HasPrefix(msg, "panic: ") && containsAny(msg, "out of memory", "cannot allocate memory",
		"stack exceeds", "pthread_create failed", "SIGSEGV",
		// A race-detector build (the tests') needs shadow memory for what
		// it allocates, and says so in its own words.
		"ThreadSanitizer failed to allocate", "address space collisions") {
		return ErrMemory
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return errorf("%s (%s)", c.cmd.ProcessState, msg)
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func (c *child) kill() {
	_ = c.in.Close()
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Kill()
	}
	_ = c.cmd.Wait()
}

// head keeps the first max bytes written to it (a dying Go runtime says
// why first, then prints its goroutines).
type head struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *head) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *head) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
