package procfs

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestEnvAndStartTicks(t *testing.T) {
	c := exec.Command("sleep", "30")
	c.Env = []string{"PATH=/usr/bin:/bin", "CAPFLOW_PROCFS_TEST=yes=1"}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	// Start returns once the child is forked; until it execs, its
	// environment is still this process's (a CI run met that).
	v, err := Env(c.Process.Pid, "CAPFLOW_PROCFS_TEST")
	for deadline := time.Now().Add(5 * time.Second); err == nil && v == "" && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		v, err = Env(c.Process.Pid, "CAPFLOW_PROCFS_TEST")
	}
	if err != nil || v != "yes=1" {
		t.Fatalf("Env: %q %v", v, err)
	}
	if v, err := Env(c.Process.Pid, "HOME"); err != nil || v != "" {
		t.Fatalf("an unset variable: %q %v", v, err)
	}
	a, err := StartTicks(c.Process.Pid)
	b, _ := StartTicks(os.Getpid())
	if err != nil || a < b {
		t.Fatalf("StartTicks: %d (this process %d) %v", a, b, err)
	}
	if !slices.Contains(Pids(), c.Process.Pid) {
		t.Fatal("Pids misses the child")
	}
	if _, err := StartTicks(1 << 30); err == nil {
		t.Fatal("a pid that does not exist")
	}
}

// Stat, Memory and Descendants of a real child (a shell with a sleep of
// its own).
func TestStatMemoryDescendants(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var kids []int
	for i := 0; i < 100 && len(kids) == 0; i++ {
		time.Sleep(20 * time.Millisecond)
		kids = Descendants(cmd.Process.Pid)
	}
	if len(kids) != 1 {
		t.Fatalf("descendants of the shell: %v", kids)
	}
	if pp, state, err := Stat(kids[0]); err != nil || pp != cmd.Process.Pid || state != 'S' {
		t.Fatalf("stat of the sleep: ppid %d (want %d), state %c, %v", pp, cmd.Process.Pid, state, err)
	}
	if rss, peak, err := Memory(os.Getpid()); err != nil || rss <= 0 || peak < rss {
		t.Fatalf("this test's memory: rss %d KiB, peak %d KiB, %v", rss, peak, err)
	}
}
