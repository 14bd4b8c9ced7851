package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fromExit reads a breach the cgroups did not count from how the tool
// ended: a file cut at file_size (SIGXFSZ, or EFBIG in a tool that
// handles it, or a tool that carried on after a child was cut), the
// per-process CPU limit (SIGXCPU), or an address-space limit's refusal.
// bubblewrap exits 128+signal like a shell: a signal alone is evidence
// only with what the limit left behind.
func (t *Tree) fromExit(exit int, tail string) *Breach {
	low := strings.ToLower(tail)
	if t.spec.FileSize > 0 {
		if f := t.fullFile(); f != "" {
			return &Breach{Limit: "file_size", Max: Bytes(t.spec.FileSize), Seen: f + " stopped at the limit"}
		}
		if exit != 0 && strings.Contains(low, "file too large") {
			return &Breach{Limit: "file_size", Max: Bytes(t.spec.FileSize)}
		}
	}
	if exit == 128+int(syscall.SIGXCPU) && t.spec.CPU > 0 && (t.cg == nil || t.cpuUsed() >= t.spec.CPU*9/10) {
		return &Breach{Limit: "cpu", Max: t.spec.CPU.String()}
	}
	if t.asLimit && exit != 0 && (strings.Contains(low, "cannot allocate memory") || strings.Contains(low, "memoryerror") || strings.Contains(low, "out of memory")) {
		return &Breach{Limit: "memory", Max: Bytes(t.spec.Memory) + " of address space per process"}
	}
	return nil
}

// cpuUsed is the tree's CPU time by its cgroup (0 without cpuacct).
func (t *Tree) cpuUsed() time.Duration {
	ns, _ := strconv.ParseInt(t.cg.read("cpuacct", "cpuacct.usage"), 10, 64)
	return time.Duration(ns)
}

// fullFile finds a file written during the step that reached file_size
// (the kernel stops a write at the limit exactly) in the tree's writable
// folders, looking at 10,000 entries at most.
func (t *Tree) fullFile() string {
	seen := 0
	found := ""
	for _, d := range t.writable {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if seen++; err != nil || found != "" || seen > 10000 {
				return filepath.SkipAll
			}
			if !e.Type().IsRegular() {
				return nil
			}
			if fi, err := e.Info(); err == nil && fi.Size() >= t.spec.FileSize && !fi.ModTime().Before(t.began) {
				found = p
			}
			return nil
		})
	}
	return found
}
