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
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name is in parentheses and may hold spaces: fields
	// start after the last ')'. starttime is field 22 (index 19 after it).
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("short /proc stat")
	}
	if f[0] == "Z" {
		return 0, errors.New("the process has exited (zombie)")
	}
	return strconv.ParseUint(f[19], 10, 64)
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
