// Package procfs reads what Linux's /proc says of a process: a variable of
// the environment it was started with, and when it started (what tells a
// process from a later one that reuses its pid).
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Env reads the variable name of the environment the kernel recorded when
// pid started ("" when it has none).
func Env(pid int, name string) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok {
			return string(v), nil
		}
	}
	return "", nil
}

// StartTicks reads when the kernel started pid (clock ticks after boot).
// A zombie counts as gone.
func StartTicks(pid int) (uint64, error) {
	// starttime is field 22 (index 19 after the command name).
	f, err := statFields(pid, 20)
	if err != nil {
		return 0, err
	}
	if f[0] == "Z" {
		return 0, errors.New("the process has exited (zombie)")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// statFields are the fields of /proc/PID/stat after the command name (in
// parentheses, and it may hold spaces: they start after the last ')'),
// at least n of them.
func statFields(pid, n int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < n {
		return nil, errors.New("short /proc stat")
	}
	return f, nil
}

// Pids are the processes /proc lists now.
func Pids() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 1 {
			out = append(out, pid)
		}
	}
	return out
}

// Stat is what /proc/PID/stat says of a process: its parent and its state
// (R, S, D, Z, T ...).
func Stat(pid int) (ppid int, state byte, err error) {
	f, err := statFields(pid, 2)
	if err != nil {
		return 0, 0, err
	}
	if len(f[0]) != 1 {
		return 0, 0, errors.New("unreadable /proc stat")
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err
}

// Memory is a process's resident set now and its peak (VmRSS and VmHWM of
// /proc/PID/status), in KiB.
func Memory(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if k == "VmRSS" {
			rss = n
		} else {
			peak = n
		}
	}
	return rss, peak, nil
}

// Descendants are pid's children, their children and so on, as /proc says
// now.
func Descendants(pid int) []int {
	kids := map[int][]int{}
	for _, p := range Pids() {
		if pp, _, err := Stat(p); err == nil {
			kids[pp] = append(kids[pp], p)
		}
	}
	var out []int
	for queue := kids[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, kids[queue[0]]...)
	}
	return out
}
