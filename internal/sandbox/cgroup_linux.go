package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

var cgroupSeq atomic.Int64

// cgroup is one tree's cgroups, one folder per controller.
type cgroup struct {
	dirs map[string]string // controller -> folder
}

// newCgroup creates the tree's cgroups with the spec's limits on the
// controllers this machine has.
func (s *Support) newCgroup(spec Spec) (*cgroup, error) {
	cg := &cgroup{dirs: map[string]string{}}
	name := fmt.Sprintf("t%d-%d-%d", os.Getpid(), cgroupSeq.Add(1), time.Now().UnixNano()%1e6)
	for c, parent := range s.cgroups {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup %s: %w", c, err)
		}
		cg.dirs[c] = dir
	}
	set := func(c, file string, v int64) error {
		if cg.dirs[c] == "" {
			return nil
		}
		return os.WriteFile(filepath.Join(cg.dirs[c], file), []byte(strconv.FormatInt(v, 10)), 0o644)
	}
	err := set("memory", "memory.limit_in_bytes", spec.Memory)
	if err == nil {
		// With swap the limit would only move the tree to disk; where the
		// kernel accounts swap, memory+swap gets the same limit.
		_ = set("memory", "memory.memsw.limit_in_bytes", spec.Memory)
		err = set("pids", "pids.max", int64(spec.Pids))
	}
	if err != nil {
		cg.remove()
		return nil, fmt.Errorf("cgroup limits: %w", err)
	}
	return cg, nil
}

// procsFiles are the files a process writes its pid to, to join.
func (cg *cgroup) procsFiles() []string {
	var out []string
	for _, d := range cg.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

func (cg *cgroup) read(c, file string) string {
	if cg == nil || cg.dirs[c] == "" {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(cg.dirs[c], file))
	return strings.TrimSpace(string(b))
}

func (cg *cgroup) has(c string) bool { return cg != nil && cg.dirs[c] != "" }

// field reads "key value" lines (memory.oom_control, pids.events).
func field(text, key string) int64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// breach reads what the kernel counted: an OOM kill, a refused fork, CPU
// time past the limit.
func (cg *cgroup) breach(spec Spec) *Breach {
	if cg == nil {
		return nil
	}
	if cg.has("memory") && field(cg.read("memory", "memory.oom_control"), "oom_kill") > 0 {
		peak, _ := strconv.ParseInt(cg.read("memory", "memory.max_usage_in_bytes"), 10, 64)
		return &Breach{Limit: "memory", Max: Bytes(spec.Memory), Seen: Bytes(peak) + " (the kernel's OOM killer stopped a process)"}
	}
	if cg.has("pids") && field(cg.read("pids", "pids.events"), "max") > 0 {
		return &Breach{Limit: "pids", Max: strconv.Itoa(spec.Pids), Seen: fmt.Sprintf("%s processes, and a fork was refused", cg.read("pids", "pids.current"))}
	}
	if cg.has("cpuacct") && spec.CPU > 0 {
		ns, _ := strconv.ParseInt(cg.read("cpuacct", "cpuacct.usage"), 10, 64)
		if time.Duration(ns) > spec.CPU {
			return &Breach{Limit: "cpu", Max: spec.CPU.String(), Seen: time.Duration(ns).Round(time.Millisecond).String() + " of CPU time"}
		}
	}
	return nil
}

// pids lists the processes still in the tree's cgroups.
func (cg *cgroup) pids() []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range cg.dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, l := range bytes.Fields(b) {
			if n, err := strconv.Atoi(string(l)); err == nil && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// remove kills what is left in the cgroups and removes them.
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	for try := 0; try < 50; try++ {
		left := cg.pids()
		if len(left) == 0 {
			break
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, d := range cg.dirs {
		for try := 0; try < 20 && os.Remove(d) != nil; try++ {
			time.Sleep(10 * time.Millisecond) // the last exit is still being accounted
		}
	}
}
