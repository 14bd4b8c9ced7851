package sandbox

// The names of the cgroups capflow makes, and those a dead worker left.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// sweepStale removes the cgroups that workers no longer running left in
// parent (a pool dies with its worker). With ours (at the process's first
// probe, before it has made any) a folder named for this process's own
// pid is a dead worker's whose pid it reuses (CI met one: pid_max is
// 32768 there, and every test process that runs a confined tool leaves
// its pool behind).
func sweepStale(parent string, ours bool) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		var pid, seq int
		if _, err := fmt.Sscanf(e.Name(), "t%d-%d", &pid, &seq); err != nil || !e.IsDir() {
			continue
		}
		if (ours && pid == os.Getpid()) || errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = os.Remove(filepath.Join(parent, e.Name()))
		}
	}
}

// treeName is the name of the cgroups capflow makes: t<worker pid>-<n>.
var treeName = regexp.MustCompile(`^t[0-9]+-[0-9]+$`)

// cgroupsOf finds the cgroups capflow made for a sandbox whose init is
// init (a server's, from its record), read from /proc before the tree
// goes: only folders named as capflow names them, right under this
// machine's capflow folders.
func (s *Support) cgroupsOf(init int) *cgroup {
	cg := &cgroup{dirs: map[string]string{}}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", init))
	if err != nil {
		return cg
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			parent := s.cgroups[c]
			if parent == "" {
				continue
			}
			dir := filepath.Join("/sys/fs/cgroup", c, f[2])
			if filepath.Dir(dir) == parent && treeName.MatchString(filepath.Base(dir)) {
				cg.dirs[c] = dir
			}
		}
	}
	return cg
}
