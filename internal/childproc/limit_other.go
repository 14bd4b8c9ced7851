//go:build !linux

package childproc

import (
	"os"
	"syscall"
)

// Elsewhere the child has only its heap limit: no portable hard cap.
func capAddressSpace(uint64) error { return nil }

func procAttr() *syscall.SysProcAttr { return nil }

func lowerPriority() {}

func executable() (string, error) { return os.Executable() }
