package mcpclient

import (
	"os/exec"
	"syscall"
)

// setProcAttr: the server dies with the process that started it (a worker
// killed with SIGKILL leaves no server behind), in a process group of its
// own, so stopping it stops what it started (npx, a shell wrapper).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// signalGroup sends sig to the server's process group.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error { return syscall.Kill(-cmd.Process.Pid, sig) }
