// Package repo holds tests about the repository itself.
package repo

import (
	"os/exec"
	"strings"
	"testing"
)

// Run output (.capflow/: caches, pid files, reports with absolute paths)
// must never be committed: tests and users create it in every project.
func TestNoRunOutputTracked(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	for _, p := range strings.Split(string(out), "\n") {
		if strings.Contains("/"+p, "/.capflow/") {
			t.Errorf("tracked run output: %s", p)
		}
	}
}
