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

// signalMembers sends sig to every process of the tree under outer (the
// init of a PID namespace takes only the signals it handles).
func signalMembers(outer int, sig syscall.Signal) {
	if init := sandboxInit(outer); init > 0 {
		for _, p := range members(init) {
			_ = syscall.Kill(p, sig)
		}
	}
}

// Leads reports whether pid is a bubblewrap process whose child is the
// init of its own PID namespace: a confined tree, stopped with Stop.
func Leads(pid int) bool {
	init := sandboxInit(pid)
	if init == 0 {
		return false
	}
	mine, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", init))
	return err1 == nil && err2 == nil && mine != its
}

// killTree kills the sandbox's init, which takes its whole PID namespace
// with it, and bubblewrap.
func killTree(outer int) {
	if init := sandboxInit(outer); init > 0 {
		_ = syscall.Kill(init, syscall.SIGKILL)
	}
	_ = syscall.Kill(-outer, syscall.SIGKILL)
}

// Stop stops the tree a bubblewrap process leads, from any process (a
// server's tree, found again by its pid): SIGTERM to every process in it,
// the whole tree killed once grace passes. alive says whether the
// bubblewrap process still runs.
func Stop(outer int, grace time.Duration, alive func() bool) string {
	defer cgroupsOf(outer).remove()
	signalMembers(outer, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive() {
			return "SIGTERM"
		}
		time.Sleep(50 * time.Millisecond)
	}
	killTree(outer)
	for i := 0; i < 40 && alive(); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	return "SIGKILL after " + grace.String()
}
