package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"

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
}

// newForker starts a thread and moves it into dirs' cgroups (controller ->
// folder). On an error the thread has ended.
func newForker(dirs map[string]string) (*forker, error) {
	f := &forker{jobs: make(chan func())}
	moved := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, and with it
		// its place in the cgroups.
		runtime.LockOSThread()
		tid := strconv.Itoa(unix.Gettid())
		for c, d := range dirs {
			if err := os.WriteFile(filepath.Join(d, "tasks"), []byte(tid), 0o644); err != nil {
				moved <- fmt.Errorf("cannot move a thread into the %s cgroup: %w", c, err)
				return
			}
		}
		moved <- nil
		for job := range f.jobs {
			job()
		}
	}()
	if err := <-moved; err != nil {
		return nil, err
	}
	return f, nil
}

// start starts cmd from the forker's thread.
func (f *forker) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	f.jobs <- func() { done <- cmd.Start() }
	return <-done
}

// stop ends the thread: the cgroups can be removed once the kernel has
// accounted its exit.
func (f *forker) stop() { close(f.jobs) }
