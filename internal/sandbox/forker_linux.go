package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// forker is an OS thread of the worker kept in one pooled tree's cgroups.
// cgroup v1 membership is per thread and a child is born in its parent
// thread's cgroups, so a bubblewrap started from the forker is in the
// tree's cgroups from its first instruction, and no step pays for moving
// it there: each write to cgroup.procs waits for the kernel's RCU grace
// period (2-9 ms a step on these machines, most of confinement's cost).
// The forker pays that once, when its cgroups are made.
//
// The thread and the bubblewrap it starts count as two of the tree's pids
// (pids.max is raised by two), its forks as a few hundred microseconds of
// the tree's CPU time, bubblewrap's memory as the tree's (a megabyte);
// the worker's memory stays charged to the worker's own cgroup (the
// memory controller charges a process's owner). A child's parent-death
// signal fires when its parent thread ends: the forker ends only once its
// cgroups are empty.
type forker struct {
	jobs chan func()
	// tid is the thread's, tasks one of its cgroups' task list: where
	// stop sees it gone.
	tid, tasks string
}

// newForker starts a thread and moves it into dirs' cgroups (controller ->
// folder). On an error the thread has ended.
func newForker(dirs map[string]string) (*forker, error) {
	f := &forker{jobs: make(chan func())}
	moved := make(chan error, 1)
	go ownThread(func() { f.run(dirs, moved) })
	if err := <-moved; err != nil {
		return nil, err
	}
	return f, nil
}

// run is the forker's goroutine, on a thread of its own (ownThread): it
// moves the thread into dirs' cgroups, then starts what it is given until
// stop. The thread ends with it, and with it its place in the cgroups (CI
// found a drained tree's cgroups left behind where the test's main thread
// had been the forker's).
func (f *forker) run(dirs map[string]string, moved chan<- error) {
	f.tid = strconv.Itoa(unix.Gettid())
	for c, d := range dirs {
		f.tasks = filepath.Join(d, "tasks")
		if err := os.WriteFile(f.tasks, []byte(f.tid), 0o644); err != nil {
			moved <- fmt.Errorf("cannot move a thread into the %s cgroup: %w", c, err)
			return
		}
	}
	moved <- nil
	for job := range f.jobs {
		job()
	}
}

// start starts cmd from the forker's thread.
func (f *forker) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	f.jobs <- func() { done <- cmd.Start() }
	return <-done
}

// stop ends the thread and waits (up to about a second) until the kernel
// has taken it out of its cgroups, which cannot be removed before: the
// thread ends when the runtime next schedules it, which a loaded machine
// delayed past the removal's own retries (CI).
func (f *forker) stop() {
	close(f.jobs)
	for wait := time.Millisecond; wait <= 512*time.Millisecond && f.inCgroup(); wait *= 2 {
		time.Sleep(wait)
	}
}

// inCgroup reports whether the thread is still in its cgroups.
func (f *forker) inCgroup() bool {
	b, err := os.ReadFile(f.tasks)
	if err != nil {
		return false // the folder is gone: nothing to wait for
	}
	return slices.Contains(strings.Fields(string(b)), f.tid)
}
