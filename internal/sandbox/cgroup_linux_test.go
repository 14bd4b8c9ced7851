package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A worker's pool outlives it as folders named for its pid. A later
// process with the same pid (pid_max is 32768 on CI machines) finds them:
// the probe removes them as stale, and a name still taken (something of
// the dead worker's left in it) is passed over, never a step's failure.
func TestCgroupsOfADeadWorkerWithThisPid(t *testing.T) {
	parent := t.TempDir()
	mine := func(seq int64) string { return filepath.Join(parent, fmt.Sprintf("t%d-%d", os.Getpid(), seq)) }
	stale := mine(cgroupSeq.Load() + 1)
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	sweepStale(parent, false)
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("a later probe removed %s: %v", stale, err)
	}
	sweepStale(parent, true)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the probe kept %s: %v", stale, err)
	}

	// Held: a file in it keeps rmdir from removing it, as a process
	// would keep a cgroup.
	held := mine(cgroupSeq.Load() + 1)
	if err := os.MkdirAll(filepath.Join(held, "busy"), 0o755); err != nil {
		t.Fatal(err)
	}
	sweepStale(parent, true)
	// Another controller's parent, where the name is free: what was made
	// there for the taken name is not left behind.
	free := t.TempDir()
	s := &Support{cgroups: map[string]string{"pids": parent, "memory": free}}
	cg, err := s.makeCgroup()
	if err != nil {
		t.Fatalf("a taken name failed the step: %v", err)
	}
	if got := cg.dirs["pids"]; got == held || filepath.Dir(got) != parent {
		t.Fatalf("made %s beside the taken %s", got, held)
	}
	if ents, _ := os.ReadDir(free); len(ents) != 1 || filepath.Join(free, ents[0].Name()) != cg.dirs["memory"] {
		t.Fatalf("the free controller holds %v, want only %s", ents, cg.dirs["memory"])
	}
}
