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

// TestRunRefusesWhatCheckRefuses: capflow run refuses a plan plan check
// refuses, before anything starts, with every problem where it is and the
// same exit (issue 54: two with: typos started a workflow that ended
// invalid with one problem, unpositioned, "and 1 more").
func TestRunRefusesWhatCheckRefuses(t *testing.T) {
	p := h.writePlan(t, "typos", `name: typos
steps:
  - {id: a, capability: test.slow, with: {secondz: 1}}
  - {id: b, capability: test.slow, with: {seconds: 1, lgo: x}}
`)
	checkCode, check, _ := h.capflow(t, "plan", "check", p)
	code, env, stderr := h.capflow(t, "run", p)
	var r struct {
		Status     string `json:"status"`
		WorkflowID string `json:"workflow_id"`
		Problems   []struct {
			File, Field, Message string
			Line                 int
		} `json:"problems"`
	}
	data(t, env, &r)
	if code != 2 || checkCode != code || r.Status != "invalid" || r.WorkflowID != "" || len(r.Problems) != 2 || env.Message != check.Message {
		t.Fatalf("exit %d (check %d) %s %+v: %s / %s\n%s", code, checkCode, r.Status, r.Problems, env.Message, check.Message, stderr)
	}
	for i, want := range []struct {
		line  int
		field string
	}{{3, "steps[0].with.seconds"}, {4, "steps[1].with.lgo"}} {
		if got := r.Problems[i]; got.Line != want.line || got.Field != want.field || !strings.HasSuffix(got.File, "typos.yaml") {
			t.Errorf("problem %d: %+v, want line %d field %s", i, got, want.line, want.field)
		}
	}
	if strings.Contains(stderr, "started") {
		t.Fatalf("a run started:\n%s", stderr)
	}
}
