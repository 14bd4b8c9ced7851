package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sandboxInit is the host pid of the sandbox's pid 1 (bubblewrap's
// child in the new PID namespace), 0 when there is none (yet, or any more).
func sandboxInit(outer int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", outer, outer))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// ownNamespace reports whether pid is the init of a PID namespace other
// than ours: a sandbox's, never a process of the worker's namespace (a
// pid reused since would be one).
func ownNamespace(pid int) bool {
	mine, err1 := os.Readlink("/proc/self/ns/pid")
	its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	n, err := nsPid(pid)
	return err1 == nil && err2 == nil && err == nil && mine != its && n == 1
}

// nsPid is pid's number inside its own PID namespace (from NSpid; 0 where
// the line is missing), or why its status could not be read.
func nsPid(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			n, _ := strconv.Atoi(f[len(f)-1])
			return n, nil
		}
	}
	return 0, nil
}

// members lists the host pids of the processes in the sandbox's PID
// namespace other than its init.
func members(init int) []int {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", init))
	if err != nil {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == init {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			out = append(out, pid)
		}
	}
	return out
}

// signalMembers sends sig to every process of the sandbox whose init is
// init (the init of a PID namespace takes only the signals it handles),
// once init is checked to be one.
func signalMembers(init int, sig syscall.Signal) {
	if init <= 0 || !ownNamespace(init) {
		return
	}
	for _, p := range members(init) {
		_ = syscall.Kill(p, sig)
	}
}

// Leads reports whether pid is a bubblewrap process whose child is the
// init of its own PID namespace: a confined tree, stopped with Stop.
func Leads(pid int) bool {
	init := sandboxInit(pid)
	return init > 0 && ownNamespace(init)
}

// Stop stops the tree a bubblewrap process leads, from any process (a
// server's tree, found again by its pid): SIGTERM to every process in it,
// the whole tree killed once grace passes, then its cgroups removed.
// alive says whether the bubblewrap process still runs.
func Stop(outer int, grace time.Duration, alive func() bool) string {
	init := sandboxInit(outer)
	if init <= 0 || !ownNamespace(init) {
		return "not a sandbox"
	}
	cg := Probe().cgroupsOf(init)
	defer cg.remove()
	signalMembers(init, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive() {
			return "SIGTERM"
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(init, syscall.SIGKILL) // its namespace goes with it
	for i := 0; i < 40 && alive(); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	return "SIGKILL after " + grace.String()
}
