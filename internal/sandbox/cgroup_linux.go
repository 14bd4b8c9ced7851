package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var cgroupSeq atomic.Int64

// cgroup is one tree's cgroups, one folder per controller.
type cgroup struct {
	dirs map[string]string // controller -> folder
	// forker starts a pooled tree's bubblewrap in these cgroups (nil: a
	// server's, or where a thread may not be moved: the tree joins them).
	forker *forker
	// zygote, started by the forker, forks the set's steps (nil: none).
	zygote *zygote
	// bwrap: the tree in the set runs under bubblewrap, whose outer
	// process counts as one of its pids.
	bwrap bool
	// Counters as the tree found them: a pooled cgroup keeps the kernel's
	// cumulative counts of the trees before.
	ooms, refused int64
	// memory and pidsMax are the limits last set (0: none yet).
	memory, pidsMax int64
	// files are the control files a tree's start and end read and write,
	// each opened once and read or written at offset 0: a dozen opens by
	// path a tree cost a confined step 0.15 ms here.
	mu    sync.Mutex
	files map[string]*os.File
}

// takeCgroup is a tree's cgroups on the controllers this machine has:
// from the pool (pooled) or new (a server's, which Stop removes from
// another process). A new pooled set gets a forker, and a zygote the
// forker starts (ready for the set's later steps).
func (s *Support) takeCgroup(pooled bool) (*cgroup, error) {
	var cg *cgroup
	if pooled {
		s.pool.mu.Lock()
		if n := len(s.pool.idle); n > 0 {
			cg, s.pool.idle = s.pool.idle[n-1], s.pool.idle[:n-1]
		}
		s.pool.mu.Unlock()
	}
	if cg != nil {
		if cg.forker == nil && s.zygotes() { // made when none could be (out of descriptors, found attacking)
			if cg.forker, _ = newForker(cg.dirs); cg.forker != nil {
				cg.zygote = startZygote(s, cg.forker)
			}
		}
		cg.zygote = renew(cg.zygote, s, cg.forker)
		return cg, nil
	}
	cg, err := s.makeCgroup()
	if err != nil || !pooled {
		return cg, err
	}
	// Without a forker the tree joins its cgroups (slower, as sound).
	if cg.forker, _ = newForker(cg.dirs); cg.forker != nil && s.zygotes() {
		cg.zygote = startZygote(s, cg.forker)
	}
	return cg, nil
}

func (s *Support) makeCgroup() (*cgroup, error) {
	for try := 0; ; try++ {
		cg, err := s.makeCgroupNamed(fmt.Sprintf("t%d-%d", os.Getpid(), cgroupSeq.Add(1)))
		if !errors.Is(err, fs.ErrExist) || try == 100 {
			return cg, err
		}
		// A folder of a dead worker whose pid this process reuses, which
		// the probe could not remove (something of that worker's is still
		// in it): the next name.
	}
}

// makeCgroupNamed makes name's folder under each controller's parent.
func (s *Support) makeCgroupNamed(name string) (*cgroup, error) {
	cg := &cgroup{dirs: map[string]string{}}
	for c, parent := range s.cgroups {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup %s: %w", c, err)
		}
		cg.dirs[c] = dir
	}
	return cg, nil
}

// limit sets the spec's limits for a tree under bubblewrap (bwrap) or
// forked by the set's zygote, and zeroes what the tree will be judged by.
func (cg *cgroup) limit(spec Spec, bwrap bool) error {
	if cg == nil {
		return nil
	}
	cg.bwrap = bwrap
	if err := cg.limitMemory(spec.Memory); err != nil {
		return err
	}
	_ = cg.write("memory", "memory.max_usage_in_bytes", 0)
	_ = cg.write("cpuacct", "cpuacct.usage", 0)
	cg.ooms = field(cg.read("memory", "memory.oom_control"), "oom_kill")
	cg.refused = field(cg.read("pids", "pids.events"), "max")
	pids := int64(spec.Pids + cg.own() + cg.dying())
	if pids == cg.pidsMax {
		return nil // a pooled set has it already
	}
	if err := cg.write("pids", "pids.max", pids); err != nil {
		return err
	}
	cg.pidsMax = pids
	return nil
}

// limitMemory sets the memory limit unless a pooled cgroup has it
// already (most steps have the default: two writes a step saved). memory
// <= memory+swap always holds: which goes first depends on whether the
// limit grows. Where the kernel accounts swap, both get the limit (with
// swap it would only move the tree to disk).
func (cg *cgroup) limitMemory(limit int64) error {
	if cg.memory == limit {
		return nil
	}
	if err := cg.write("memory", "memory.limit_in_bytes", limit); err != nil {
		if cg.write("memory", "memory.memsw.limit_in_bytes", limit) != nil {
			return err
		}
		if err := cg.write("memory", "memory.limit_in_bytes", limit); err != nil {
			return err
		}
	}
	// Kept only once memory+swap holds it too, or the kernel counts no
	// swap: a failed lowering would otherwise never be tried again.
	const memsw = "memory.memsw.limit_in_bytes"
	if err := cg.write("memory", memsw, limit); err == nil || !cg.hasFile("memory", memsw) {
		cg.memory = limit
	}
	return nil
}

// dying counts the tasks of earlier trees the pids controller still
// charges (their release lags their exit by up to a second or two here):
// pids.max is raised by them, or a pooled cgroup reused at once would
// refuse a tree's forks it is allowed.
func (cg *cgroup) dying() int {
	n, err := strconv.Atoi(cg.read("pids", "pids.current"))
	if err != nil {
		return 0
	}
	return max(n-cg.resident(), 0)
}

// resident is what of capflow's stays in a pooled set between trees: the
// forker's thread and the zygote (counted while it may be there).
func (cg *cgroup) resident() int {
	if cg.forker == nil {
		return 0
	}
	if cg.zygote.present() {
		return 2
	}
	return 1
}

// own is what of capflow's a tree's pids count beyond the tool's: what
// stays in the set, and a bubblewrap the forker starts (which otherwise
// stays outside, only its child joining). A zygote's tree is its init
// and the tool, as bubblewrap's child and the tool are.
func (cg *cgroup) own() int {
	if cg.forker != nil && cg.bwrap {
		return cg.resident() + 1
	}
	return cg.resident()
}

// start starts cmd in the cgroups where a forker can (Tree.handshake
// joins them otherwise).
func (cg *cgroup) start(cmd *exec.Cmd) error {
	if cg == nil || cg.forker == nil {
		return cmd.Start()
	}
	return cg.forker.start(cmd)
}

// join moves pid into the tree's cgroups.
func (cg *cgroup) join(pid int) error {
	for c, d := range cg.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				// bubblewrap exited at once: it could not lay out the tree.
				return fmt.Errorf("the sandbox exited before it started the tool (bubblewrap could not set up its file system; run the tool with sandbox: off in policy.yaml to compare): %w", err)
			}
			return fmt.Errorf("cannot join the %s cgroup: %w", c, err)
		}
	}
	return nil
}

// breach reads what the kernel counted: an OOM kill, a refused fork, CPU
// time past the limit.
func (cg *cgroup) breach(spec Spec) *Breach {
	if cg == nil {
		return nil
	}
	if cg.has("memory") && field(cg.read("memory", "memory.oom_control"), "oom_kill") > cg.ooms {
		peak, _ := strconv.ParseInt(cg.read("memory", "memory.max_usage_in_bytes"), 10, 64)
		return &Breach{Limit: "memory", Max: Bytes(spec.Memory), Seen: Bytes(peak) + " (the kernel's OOM killer stopped a process)"}
	}
	if cg.has("pids") && field(cg.read("pids", "pids.events"), "max") > cg.refused {
		n, _ := strconv.Atoi(cg.read("pids", "pids.current"))
		return &Breach{Limit: "pids", Max: strconv.Itoa(spec.Pids), Seen: fmt.Sprintf("%d processes, and a fork was refused", n-cg.own())}
	}
	if cg.has("cpuacct") && spec.CPU > 0 {
		ns, _ := strconv.ParseInt(cg.read("cpuacct", "cpuacct.usage"), 10, 64)
		if time.Duration(ns) > spec.CPU {
			return &Breach{Limit: "cpu", Max: spec.CPU.String(), Seen: time.Duration(ns).Round(time.Millisecond).String() + " of CPU time"}
		}
	}
	return nil
}

// pids lists the processes still in the tree's cgroups, never the
// worker's (its forker's thread is there); false when a list could not be
// read.
func (cg *cgroup) pids() ([]int, bool) {
	seen := map[int]bool{os.Getpid(): true, cg.zygote.pid(): true}
	var out []int
	ok := true
	for _, d := range cg.dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		ok = ok && err == nil
		for _, l := range bytes.Fields(b) {
			if n, err := strconv.Atoi(string(l)); err == nil && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out, ok
}

// empty reports whether the cgroups are known to hold nothing of a tree's
// (one that cannot be read is not).
func (cg *cgroup) empty() bool {
	left, ok := cg.pids()
	return ok && len(left) == 0
}

// remove kills what is left in the cgroups and removes them.
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	if cg.zygote != nil {
		cg.zygote.stop() // it exits with its socket closed
		cg.zygote.wait(time.Second)
		cg.zygote = nil
	}
	if cg.forker != nil {
		cg.forker.stop()
		cg.forker = nil
	}
	for try := 0; try < 50; try++ {
		left, ok := cg.pids()
		if ok && len(left) == 0 {
			break
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cg.closeFiles()
	for _, d := range cg.dirs {
		for try := 0; try < 20 && os.Remove(d) != nil; try++ {
			time.Sleep(10 * time.Millisecond) // the last exit is still being accounted
		}
	}
}
