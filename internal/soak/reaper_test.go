package soak

import (
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What outlives its parent is adopted by the soak and listed; a tool of
// an ended run is listed wherever it lives; once gone, neither is, and
// the adopted one was reaped (no zombie left).
func TestOrphans(t *testing.T) {
	r, err := newReaper([]string{"not-this"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.run(exec.Command("sh", "-c", "sleep 31 & exit 0")); err != nil {
		t.Fatal(err)
	}
	tool := exec.Command("sleep", "32")
	tool.Env = []string{"CAPFLOW_RUN_ID=soak-test-001-x"}
	if err := r.start(tool); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tool.Process.Kill(); _ = tool.Wait() }()
	// Until both are seen as what they run: sh's child can be found
	// before it has become sleep (CI saw "sh -c sleep 31 & exit 0").
	var got []Orphan
	var cmds []string
	want := func() bool {
		return len(cmds) == 2 && strings.HasPrefix(cmds[0], "sleep 31: its parent died") && strings.HasPrefix(cmds[1], "sleep 32: a tool of run soak-test-001-x")
	}
	for i := 0; i < 100 && !want(); i++ {
		if i > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		got, cmds = r.orphans("soak-test-", ""), nil
		for _, o := range got {
			cmds = append(cmds, o.Command+": "+o.Why)
		}
		slices.Sort(cmds)
	}
	if !want() {
		t.Fatalf("orphans: %q", cmds)
	}
	for _, o := range got {
		_ = syscall.Kill(o.Pid, syscall.SIGKILL)
	}
	_ = tool.Wait()
	r.forget(tool)
	for i := 0; i < 100 && len(r.orphans("soak-test-", "")) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if left := r.orphans("soak-test-", ""); len(left) > 0 || len(r.adopted()) > 0 {
		t.Fatalf("left: %+v", left)
	}
}
