package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// fromExit reads a breach from how the tool ended: the rlimit signals
// (bubblewrap exits 128+signal), or the errors the kernel's refusals
// become in a tool that handles them.
func (t *Tree) fromExit(exit int, tail string) *Breach {
	low := strings.ToLower(tail)
	switch {
	case exit == 128+int(syscall.SIGXFSZ) || strings.Contains(low, "file too large"):
		return &Breach{Limit: "file_size", Max: Bytes(t.spec.FileSize)}
	case exit == 128+int(syscall.SIGXCPU):
		return &Breach{Limit: "cpu", Max: t.spec.CPU.String()}
	case t.rlim && exit != 0 && (strings.Contains(low, "cannot allocate memory") || strings.Contains(low, "memoryerror") || strings.Contains(low, "out of memory")):
		return &Breach{Limit: "memory", Max: Bytes(t.spec.Memory) + " of address space per process"}
	}
	if t.spec.FileSize > 0 {
		// A process the tool ran was stopped at the limit, and the tool
		// carried on: the file it was writing tells.
		if f := fullFile(t.write, t.spec.FileSize); f != "" {
			return &Breach{Limit: "file_size", Max: Bytes(t.spec.FileSize), Seen: f + " stopped at the limit"}
		}
	}
	return nil
}

// fullFile finds a file of at least limit bytes in dirs (the kernel stops
// a write at the limit exactly), looking at 10,000 entries at most.
func fullFile(dirs []string, limit int64) string {
	seen := 0
	found := ""
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if seen++; err != nil || found != "" || seen > 10000 {
				return filepath.SkipAll
			}
			if e.Type().IsRegular() {
				if fi, err := e.Info(); err == nil && fi.Size() >= limit {
					found = p
				}
			}
			return nil
		})
	}
	return found
}
