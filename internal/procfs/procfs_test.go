package procfs

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestEnvAndStartTicks(t *testing.T) {
	c := exec.Command("sleep", "30")
	c.Env = []string{"PATH=/usr/bin:/bin", "CAPFLOW_PROCFS_TEST=yes=1"}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	if v, err := Env(c.Process.Pid, "CAPFLOW_PROCFS_TEST"); err != nil || v != "yes=1" {
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
