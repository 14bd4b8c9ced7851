package toolrun

import "syscall"

// procAttr puts the tool in its own process group (so the whole tree can
// be signalled) and kills it if the worker dies, so a SIGKILLed worker
// leaves no orphan tools behind; Temporal retries the step elsewhere.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
