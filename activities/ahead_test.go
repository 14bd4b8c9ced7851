package activities

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/wfapi"
)

// TestInlineAhead: a batch evaluates the steps that follow it once the
// steps they follow succeeded in it, each with the data it reads filled
// in as the workflow will, and keyed by the input the workflow then
// builds; a step after one that failed, a command and a builtin with
// effects are left to start as they would.
func TestInlineAhead(t *testing.T) {
	a, root := aheadActivities(t)
	plan := map[string]any{"name": "p", "steps": aheadSteps(query("q1", "1 + 1", 0))}
	rr := resolved(t, env(a), a, plan)
	if rr.Status != "ready" {
		t.Fatalf("%s: %s", rr.Status, rr.Message)
	}
	call := func(id string, deps map[string]wfapi.StepOutcome) wfapi.RunToolInput {
		i := slices.IndexFunc(rr.Steps, func(s wfapi.ResolvedStep) bool { return s.ID == id })
		s := rr.Steps[i]
		return wfapi.RunToolInput{WorkflowID: testRun, RunDir: rr.RunDir, Deps: deps,
			Step: wfapi.StepCall{ID: id, Capability: s.Capability, Tool: s.Tool, Version: s.Version, Digest: s.Digest, Idempotent: s.Idempotent, With: s.With}}
	}
	pending := map[string]wfapi.StepOutcome{"q1": {Status: wfapi.StepRunning}}
	follow := []wfapi.InlineFollow{
		{Call: call("q2", pending), After: []string{"q1"}, Reads: map[string]bool{"q1": true}},
		{Call: call("q3", map[string]wfapi.StepOutcome{"q2": {Status: wfapi.StepPending}}), After: []string{"q2"}, Reads: map[string]bool{"q2": true}},
		{Call: call("bad", nil), After: []string{"q1"}},
		{Call: call("q4", map[string]wfapi.StepOutcome{"bad": {Status: wfapi.StepPending}}), After: []string{"bad"}, Reads: map[string]bool{"bad": true}},
		{Call: call("cmd", nil), After: []string{"q1"}},
		{Call: call("file", nil), After: []string{"q1"}},
	}
	wc := wfapi.InlineContext{WorkflowID: testRun, WorkflowType: wfapi.WorkflowType, Time: time.Minute, Bytes: 1 << 20}
	b := a.Exec.Inline([]wfapi.RunToolInput{call("q1", nil)}, follow, wc)
	if len(b.Outcomes) != 1 || !b.Outcomes[0].OK {
		t.Fatalf("q1: %+v", b.Outcomes)
	}
	var ids []string
	for _, x := range b.Ahead {
		ids = append(ids, x.ID)
	}
	if !slices.Equal(ids, []string{"q2", "q3"}) {
		t.Fatalf("evaluated ahead %v, want q2 and q3 (bad failed, q4 follows it, cmd is a command, file writes a file)", ids)
	}
	// The input the workflow builds for q3 once q2 took its outcome: q2's
	// data as the marker gives it back.
	q2 := map[string]any{"count": float64(1), "result": float64(20), "results": []any{float64(20)}}
	want := call("q3", map[string]wfapi.StepOutcome{"q2": wfapi.Succeeded(q2, "", "", nil, true)})
	if got := b.Ahead[1]; got.Key != wfapi.InlineKey(want) || fmt.Sprint(got.Result.Envelope.Data) != "map[count:1 result:21 results:[21]]" {
		t.Fatalf("q3 ahead: key %s (want %s), data %v", got.Key, wfapi.InlineKey(want), got.Result.Envelope.Data)
	}
	if _, err := os.Stat(filepath.Join(rr.RunDir, "steps", "cmd", "started")); !os.IsNotExist(err) {
		t.Fatalf("a command ran ahead: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "out", "x.txt")); !os.IsNotExist(err) {
		t.Fatalf("a builtin with effects ran ahead: %v", err)
	}
}

// Resolve, asked to evaluate ahead (baseline 4), evaluates the steps a run
// starts with and those that follow them, each keyed by the input the
// workflow then builds; what a batch would not evaluate ahead it does not.
func TestResolveEvaluatesTheFirstSteps(t *testing.T) {
	a, root := aheadActivities(t)
	plan := map[string]any{"name": "p", "inputs": map[string]any{"n": map[string]any{"type": "number", "default": 1}},
		"steps": aheadSteps(query("q1", ".[0] + 1", []any{"${inputs.n}"}))}
	for _, ahead := range []bool{true, false} {
		v, err := env(a).ExecuteActivity(a.Resolve, wfapi.ResolveInput{Plan: plan, WorkflowID: testRun, CarrySteps: true, Ahead: ahead})
		if err != nil {
			t.Fatal(err)
		}
		var rr wfapi.ResolveResult
		_ = v.Get(&rr)
		var ids []string
		for _, x := range rr.Ahead {
			ids = append(ids, x.ID)
		}
		if !ahead {
			if len(ids) > 0 {
				t.Fatalf("not asked, Resolve evaluated %v", ids)
			}
			continue
		}
		if rr.Status != "ready" || !slices.Equal(ids, []string{"q1", "q2", "q3"}) {
			t.Fatalf("%s: evaluated %v, want q1, q2, q3 (bad failed, q4 follows it, cmd is a command, file writes a file)", rr.Status, ids)
		}
		// The inputs q1 starts with, and q3's once q2 took its outcome,
		// as the workflow builds them from Resolve's marker.
		stepOf := func(id string) wfapi.ResolvedStep {
			return rr.Steps[slices.IndexFunc(rr.Steps, func(s wfapi.ResolvedStep) bool { return s.ID == id })]
		}
		q1 := wfapi.RunToolInput{Step: wfapi.CallOf(stepOf("q1")), Inputs: map[string]any{"n": float64(1)}}
		q2 := map[string]any{"count": float64(1), "result": float64(20), "results": []any{float64(20)}}
		q3 := wfapi.RunToolInput{Step: wfapi.CallOf(stepOf("q3")), Deps: map[string]wfapi.StepOutcome{"q2": wfapi.Succeeded(q2, "", "", nil, true)}}
		if rr.Ahead[0].Key != wfapi.InlineKey(q1) || rr.Ahead[2].Key != wfapi.InlineKey(q3) || fmt.Sprint(rr.Ahead[2].Result.Envelope.Data) != "map[count:1 result:21 results:[21]]" {
			t.Fatalf("keys %s %s (want %s %s), q3's data %v", rr.Ahead[0].Key, rr.Ahead[2].Key, wfapi.InlineKey(q1), wfapi.InlineKey(q3), rr.Ahead[2].Result.Envelope.Data)
		}
		if _, err := os.Stat(filepath.Join(rr.RunDir, "steps", "cmd", "started")); !os.IsNotExist(err) {
			t.Fatalf("a command ran ahead: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "out", "x.txt")); !os.IsNotExist(err) {
			t.Fatalf("a builtin with effects ran ahead: %v", err)
		}
	}
}

// aheadActivities are activities whose inline steps have the time to be
// evaluated (what is evaluated, not how fast), with the project's quick
// command tool.
func aheadActivities(t *testing.T) (*Activities, string) {
	a, root := newActivities(t)
	a.Exec.InlineStepTime = 10 * time.Second
	builtin.Prepare()
	quickTool(root, "")
	return a, root
}

func query(id, q string, input any) map[string]any {
	return map[string]any{"id": id, "capability": "json.query", "with": map[string]any{"query": q, "input": input}}
}

// aheadSteps are q1, a chain of two queries after it, a failing query and
// one after it, a command and a builtin that writes a file.
func aheadSteps(q1 map[string]any) []any {
	return []any{
		q1,
		query("q2", ".[0] * 10", "${steps.q1.data.results}"),
		query("q3", ".[0] + 1", "${steps.q2.data.results}"),
		query("bad", `error("boom")`, 1),
		query("q4", ".", "${steps.bad.data.results}"),
		map[string]any{"id": "cmd", "capability": "test.quick"},
		map[string]any{"id": "file", "capability": "text.render", "with": map[string]any{"template": "x", "output_path": "out/x.txt"}},
	}
}
