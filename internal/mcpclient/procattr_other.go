//go:build !linux

package mcpclient

import (
	"os/exec"
	"syscall"
)

func setProcAttr(*exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error { return cmd.Process.Signal(sig) }
