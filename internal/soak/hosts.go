package soak

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capflow/capflow/internal/procfs"
)

// host is one worker as a host of its own: its own copy of the project
// (so its own run folders and host queue), its own log, started, killed,
// frozen and thawed by the soak.
type host struct {
	name, dir, logFile, worker string
	env                        []string
	reaper                     *reaper
	ns                         *netns // nil: the machine's network

	mu      sync.Mutex
	cmd     *exec.Cmd
	starts  int
	peakKiB int64
}

// start starts the worker and waits until it polls.
func (h *host) start(ctx context.Context) error {
	logf, err := os.OpenFile(h.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(h.worker, "--project", h.dir)
	if h.ns != nil {
		cmd = h.ns.command(h.worker, "--project", h.dir)
	}
	cmd.Env, cmd.Stdout, cmd.Stderr = h.env, logf, logf
	if err := h.reaper.start(cmd); err != nil {
		return fmt.Errorf("%s: %v", h.name, err)
	}
	h.mu.Lock()
	h.cmd = cmd
	h.starts++
	want := h.starts
	h.mu.Unlock()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); h.reaper.forget(cmd); close(exited) }()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		b, _ := os.ReadFile(h.logFile)
		if bytes.Count(b, []byte("worker started")) >= want {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s: the worker exited at start (see %s)", h.name, h.logFile)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: the worker did not start within a minute (see %s)", h.name, h.logFile)
}

func (h *host) pid() int {
	if p := h.process(); p != nil {
		return p.Pid
	}
	return 0
}

func (h *host) process() *os.Process {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return nil
	}
	return h.cmd.Process
}

// signal signals the worker through its os.Process, which never signals
// a pid reused after the worker was waited for.
func (h *host) signal(sig syscall.Signal) int {
	p := h.process()
	if p == nil || p.Signal(sig) != nil {
		return 0
	}
	return p.Pid
}

// kill SIGKILLs the worker, as a crash would; its tools are left to what
// capflow does about them.
func (h *host) kill() {
	h.sample()
	if p := h.signal(syscall.SIGKILL); p > 0 {
		for i := 0; i < 100 && alive(p); i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// stop ends the worker gracefully (the soak's end).
func (h *host) stop() {
	if p := h.signal(syscall.SIGTERM); p > 0 {
		for i := 0; i < 300 && alive(p); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		h.signal(syscall.SIGKILL)
	}
}

// freeze stops (or continues) the worker and every process under it: the
// host is gone for Temporal and for its tools alike, and comes back as it
// was, late.
func (h *host) freeze(stop bool) error {
	p := h.pid()
	if p == 0 {
		return fmt.Errorf("%s has no worker", h.name)
	}
	sig := syscall.SIGCONT
	if stop {
		h.sample()
		sig = syscall.SIGSTOP
	}
	// Twice: a process forked while the first pass ran is caught by the
	// second (its parent is stopped by then).
	for range 2 {
		for _, q := range append([]int{p}, procfs.Descendants(p)...) {
			_ = syscall.Kill(q, sig)
		}
	}
	return nil
}

// tools counts the processes under the worker that are tools of the
// soak's runs.
func (h *host) tools(runPrefix string) int {
	p := h.pid()
	if p == 0 {
		return 0
	}
	n := 0
	for _, q := range procfs.Descendants(p) {
		if id, _ := procfs.Env(q, "CAPFLOW_RUN_ID"); strings.HasPrefix(id, runPrefix) {
			n++
		}
	}
	return n
}

// sample records the worker's peak resident set.
func (h *host) sample() {
	p := h.pid()
	if p == 0 {
		return
	}
	rss, peak, err := procfs.Memory(p)
	if err != nil {
		return
	}
	h.mu.Lock()
	h.peakKiB = max(h.peakKiB, rss, peak)
	h.mu.Unlock()
}

func (h *host) peakMB() float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return float64(h.peakKiB) / 1024
}

func alive(pid int) bool {
	_, state, err := procfs.Stat(pid)
	return err == nil && state != 'Z'
}

// prepare copies the soak project for a host (or the client) and links
// the kits beside it.
func prepare(src, kits, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("%s exists: give --work a new or empty folder", dst)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return fmt.Errorf("copy the soak project to %s: %v", dst, err)
	}
	if err := os.MkdirAll(filepath.Join(dst, "logs"), 0o755); err != nil {
		return err
	}
	return os.Symlink(kits, filepath.Join(dst, "kits"))
}
