package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/capflow/capflow/internal/procfs"
	"github.com/capflow/capflow/internal/seal"
)

// A step's sandbox carries, in the environment bubblewrap and its init
// start with, which worker made it (this machine's tag, the worker's pid
// and start time). A worker SIGKILLed while a sandbox starts can leave
// that sandbox's init behind, outside every cgroup (the parent bubblewrap
// died before its child armed --die-with-parent): the next worker on the
// machine sweeps such orphans at its start (SweepOrphans).

// WorkerEnv names the variable.
const WorkerEnv = "CAPFLOW_SANDBOX_WORKER"

// machineTag ties a sandbox to this machine's capflow (the ownership
// key's seal): another installation's sandboxes are never swept.
var machineTag = sync.OnceValue(func() string {
	s := seal.Of("capflow-sandbox-worker", nil)
	if len(s) < 16 {
		return ""
	}
	return s[:16]
})

// workerMark is this worker's value of WorkerEnv ("" without a key).
var workerMark = sync.OnceValue(func() string {
	ticks, err := procfs.StartTicks(os.Getpid())
	if machineTag() == "" || err != nil {
		return ""
	}
	return fmt.Sprintf("%s.%d.%d", machineTag(), os.Getpid(), ticks)
})

// SweepOrphans kills every process of a step's sandbox whose worker is
// gone (a pid that no longer runs, or runs another program), and returns
// their pids. Runtime-kit servers carry no mark: they outlive a worker
// on purpose, and their run stops them.
func SweepOrphans() []int {
	tag := machineTag()
	if tag == "" {
		return nil
	}
	var killed []int
	for _, pid := range procfs.Pids() {
		mark, err := procfs.Env(pid, WorkerEnv)
		if err != nil || !strings.HasPrefix(mark, tag+".") || workerAlive(mark) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// workerAlive: the worker a mark names still runs.
func workerAlive(mark string) bool {
	f := strings.Split(mark, ".")
	if len(f) != 3 {
		return false
	}
	pid, err1 := strconv.Atoi(f[1])
	ticks, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	now, err := procfs.StartTicks(pid)
	return err == nil && now == ticks
}
