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

// capflow init makes a project whose example plan runs on the project's
// own worker: the task queue its capflow.yaml names keeps its runs off
// every other project's worker (the getting-started trap above).
func TestInitMakesAProjectThatRuns(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "My Project")
	code, env, _ := h.capflowAt(t, dir, nil, "init")
	var made struct {
		Files     []string `json:"files"`
		TaskQueue string   `json:"task_queue"`
	}
	data(t, env, &made)
	if code != 0 || made.TaskQueue != "my-project" || strings.Join(made.Files, " ") != "capflow.yaml plans/hello.yaml .gitignore tools/" {
		t.Fatalf("init: exit %d %s %+v", code, env.Message, made)
	}
	if code, env, _ = h.capflowAt(t, dir, nil, "init"); code != 2 || !strings.Contains(env.Message, "is already a capflow project (it has capflow.yaml): nothing was written") {
		t.Fatalf("init again: exit %d %s", code, env.Message)
	}
	workerAt(t, dir)
	if code, env, _ = h.capflowAt(t, dir, nil, "run", filepath.Join(dir, "plans", "hello.yaml"), "--input", "who=e2e"); code != 0 {
		t.Fatalf("run: exit %d %s", code, env.Message)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "hello.txt")); err != nil || string(b) != "hello e2e" {
		t.Fatalf("out/hello.txt: %q %v", b, err)
	}
}

// TestRunRefusesWhatCheckRefuses: capflow run refuses a plan plan check
// refuses, before anything starts, with every problem where it is, the
// same exit and check's message, saying nothing was started (issue 54: two with: typos started a workflow that ended
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
	if code != 2 || checkCode != code || r.Status != "invalid" || r.WorkflowID != "" || len(r.Problems) != 2 || env.Message != check.Message+" (nothing was started)" {
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
