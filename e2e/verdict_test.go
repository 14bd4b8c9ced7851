package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A worker resolves plans against its own project: when it refuses a plan
// the CLI's project finds ready, run says so (the getting-started trap: a
// new tool in /tmp/demo, the make dev worker serving another project).
func TestRunSaysWhenTheWorkerJudgesOtherwise(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "capflow.yaml"), []byte("tools_dirs: [tools]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, env, _ := h.capflowAt(t, dir, nil, "tools", "scaffold", "word-count", "--capability", "text.count"); code != 0 {
		t.Fatalf("scaffold: %s", env.Message)
	}
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("name: count\nsteps:\n  - {id: count, capability: text.count}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, env, stderr := h.capflowAt(t, dir, nil, "run", plan)
	warned := false
	for _, f := range env.Feedback {
		if f.Phase == "check" && f.Level == "warning" && strings.Contains(f.Message, "this project's check finds the plan ready, the worker's says partial-complete") {
			warned = true
		}
	}
	if code != 3 || !warned || !strings.Contains(stderr, "the worker resolves against its own project") {
		t.Fatalf("exit %d %s, feedback %+v\n%s", code, env.Message, env.Feedback, stderr)
	}
}
