//go:build !linux

package childproc

import "syscall"

// Elsewhere the child has only its heap limit: no portable hard cap.
func capAddressSpace(uint64) error { return nil }

func procAttr() *syscall.SysProcAttr { return nil }

func lowerPriority() {}
