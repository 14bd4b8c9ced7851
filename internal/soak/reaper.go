package soak

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capflow/capflow/internal/procfs"
	"github.com/capflow/capflow/internal/runtimekit"
)

// reaper makes the soak the subreaper of everything it starts: a process
// whose parent dies (a tool of a killed worker, a server a run started)
// becomes the soak's child instead of init's, so that at the end the soak
// can tell what outlived its run. It reaps those adopted children as they
// exit (every half second: a restarted server left a zombie would look
// alive to the script that stops it next), leaving its own (exec.Cmd's)
// to their Wait.
type reaper struct {
	mu    sync.Mutex
	known map[int]bool
	// infra are the programs of the parts the fault commands start again
	// (adopted when their script exits): not orphans.
	infra []string
}

func newReaper(infra []string) (*reaper, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, err
	}
	return &reaper{known: map[int]bool{}, infra: infra}, nil
}

// reap reaps the adopted children that exited until ctx ends.
func (r *reaper) reap(ctx context.Context) {
	for sleep(ctx, 500*time.Millisecond) {
		r.adopted()
	}
}

// start starts cmd as one of the soak's own children.
func (r *reaper) start(cmd *exec.Cmd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	r.known[cmd.Process.Pid] = true
	return nil
}

func (r *reaper) forget(cmd *exec.Cmd) {
	r.mu.Lock()
	delete(r.known, cmd.Process.Pid)
	r.mu.Unlock()
}

// run starts cmd and waits for it.
func (r *reaper) run(cmd *exec.Cmd) error {
	if err := r.start(cmd); err != nil {
		return err
	}
	defer r.forget(cmd)
	return cmd.Wait()
}

// adopted are the soak's children it did not start, the exited ones
// reaped on the way.
func (r *reaper) adopted() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	self := os.Getpid()
	var out []int
	for _, p := range procfs.Pids() {
		pp, state, err := procfs.Stat(p)
		if err != nil || pp != self || r.known[p] {
			continue
		}
		if state == 'Z' {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p, &ws, syscall.WNOHANG, nil)
			continue
		}
		out = append(out, p)
	}
	return out
}

// Orphan is a process that outlived its run.
type Orphan struct {
	Pid     int    `json:"pid"`
	Command string `json:"command"`
	Why     string `json:"why"`
}

// orphans lists, once every run has ended, what is still alive of them:
// a process adopted by the soak that is not a part of the cluster, and
// anywhere on the machine a tool of one of the soak's runs (its
// CAPFLOW_RUN_ID) or a server a run started (its owner token).
func (r *reaper) orphans(runPrefix, work string) []Orphan {
	var out []Orphan
	seen := map[int]bool{}
	add := func(p int, why string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, Orphan{Pid: p, Command: command(p), Why: why})
		}
	}
	for _, p := range r.adopted() {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(p) + "/exe"); !slices.Contains(r.infra, filepath.Base(exe)) {
			add(p, "its parent died and it lives on (adopted by the soak)")
		}
	}
	for _, p := range procfs.Pids() {
		if id, _ := procfs.Env(p, "CAPFLOW_RUN_ID"); strings.HasPrefix(id, runPrefix) {
			add(p, "a tool of run "+id+", which has ended")
		} else if tok, _ := procfs.Env(p, runtimekit.OwnerEnv); tok != "" && under(p, work) {
			add(p, "a server a run started, which has ended")
		}
	}
	return out
}

// under reports whether pid works in a folder beneath dir (a server runs
// in its host's project copy): another soak's servers are not this one's.
func under(pid int, dir string) bool {
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	return err == nil && (dir == "" || cwd == dir || strings.HasPrefix(cwd, dir+string(os.PathSeparator)))
}

func command(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
