package activities

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capflow/capflow/internal/wfapi"
)

// TestInline: what the worker evaluates inside the workflow task, and what
// it leaves to the local activity.
func TestInline(t *testing.T) {
	a, _ := newActivities(t)
	e := env(a)
	plan := map[string]any{"name": "p", "steps": []any{
		map[string]any{"id": "q", "capability": "json.query", "with": map[string]any{"query": "1 + 1"}},
	}}
	v, err := e.ExecuteActivity(a.Resolve, wfapi.ResolveInput{Plan: plan, WorkflowID: testRun})
	if err != nil {
		t.Fatal(err)
	}
	var rr wfapi.ResolveResult
	_ = v.Get(&rr)
	st := rr.Steps[0]
	if !st.Local || !st.Inline {
		t.Fatalf("json.query resolved local %v, inline %v", st.Local, st.Inline)
	}
	call := func(with map[string]any) wfapi.StepCall {
		return wfapi.StepCall{ID: "q", Tool: st.Tool, Version: st.Version, Digest: st.Digest, Idempotent: true, With: with}
	}
	eval := Inline(a)
	p := map[string]wfapi.StepOutcome{"p": {Success: true, Data: map[string]any{"n": 41}}}
	for _, tt := range []struct {
		name string
		with map[string]any
		deps map[string]wfapi.StepOutcome
		ok   bool
	}{
		{"a query of its input", map[string]any{"query": ".a + 1", "input": map[string]any{"a": 1}}, nil, true},
		{"a query of a step's data", map[string]any{"query": ".", "input": "${steps.p.data.n}"}, p, true},
		{"a file", map[string]any{"query": ".", "path": "x.json"}, nil, false},
		{"stored data", map[string]any{"query": ".", "input": "${steps.p.data.n}"}, map[string]wfapi.StepOutcome{"p": {Success: true, DataFile: "/x/data.json"}}, false},
		{"a failure", map[string]any{"query": `error("boom")`, "input": 1}, nil, false},
		{"too large a result", map[string]any{"query": "[range(20000)]", "input": 1}, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, ok := eval(wfapi.RunToolInput{WorkflowID: testRun, RunDir: rr.RunDir, Step: call(tt.with), Deps: tt.deps})
			if ok != tt.ok {
				t.Fatalf("ok %v, want %v: %+v", ok, tt.ok, res.Envelope)
			}
			if ok && (!res.Envelope.Success || res.Attempt != 1 || res.InputsSHA256 == "" || res.EnvelopeFile != "") {
				t.Fatalf("%+v", res)
			}
		})
	}
	res, _ := eval(wfapi.RunToolInput{WorkflowID: testRun, RunDir: rr.RunDir, Step: call(map[string]any{"query": ".n + 1", "input": "${steps.p.data}"}), Deps: p})
	if d, _ := res.Envelope.Data.(map[string]any); d == nil || fmt.Sprint(d["result"]) != "42" {
		t.Fatalf("data %+v", res.Envelope.Data)
	}
	// Nothing written: no step folder.
	if _, err := os.Stat(filepath.Join(rr.RunDir, "steps")); !os.IsNotExist(err) {
		t.Fatalf("an inline evaluation wrote the run's steps folder: %v", err)
	}
}
