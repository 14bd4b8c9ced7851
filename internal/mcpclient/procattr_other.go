//go:build !linux

package mcpclient

import "os/exec"

func setProcAttr(*exec.Cmd) {}
