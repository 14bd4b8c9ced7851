package mcpclient

import (
	"os/exec"
	"syscall"
)

// setProcAttr: the server dies with the process that started it (a worker
// killed with SIGKILL leaves no server behind).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
