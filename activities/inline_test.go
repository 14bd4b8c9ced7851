package activities

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// TestInline: what the worker runs in an inline batch's local activity, and what
// it leaves to the local activity.
func TestInline(t *testing.T) {
	a, _ := newActivities(t)
	// What is evaluated inline, not how fast (the race detector, a loaded machine).
	a.Exec.InlineStepTime = 10 * time.Second
	builtin.Prepare() // a jq child ready, as a worker readies one when it starts
	e := env(a)
	plan := map[string]any{"name": "p", "steps": []any{
		map[string]any{"id": "q", "capability": "json.query", "with": map[string]any{"query": "1 + 1"}},
	}}
	rr := resolved(t, e, a, plan)
	st := rr.Steps[0]
	if !st.Local || !st.Inline {
		t.Fatalf("json.query resolved local %v, inline %v", st.Local, st.Inline)
	}
	call := func(with map[string]any) wfapi.StepCall {
		return wfapi.StepCall{ID: "q", Tool: st.Tool, Version: st.Version, Digest: st.Digest, Idempotent: true, With: with}
	}
	batch := a.Exec.Inline
	ample := wfapi.InlineContext{Time: time.Minute, Bytes: 1 << 20}
	eval := func(in wfapi.RunToolInput) (wfapi.RunToolResult, bool) {
		b := batch([]wfapi.RunToolInput{in}, nil, ample)
		if len(b.Outcomes) != 1 || b.Stop {
			t.Fatalf("one call, ample budget: %+v", b)
		}
		o := b.Outcomes[0]
		if o.OK != (o.Result != nil) || (o.OK && o.Size == 0) {
			t.Fatalf("outcome %+v", o)
		}
		if o.Result == nil {
			return wfapi.RunToolResult{}, false
		}
		return *o.Result, true
	}
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
	// A batch stops where its time or bytes end: the rest run as local
	// activities of their own.
	big := wfapi.RunToolInput{WorkflowID: testRun, RunDir: rr.RunDir, Step: call(map[string]any{"query": "[range(2500)]", "input": 1})}
	calls := make([]wfapi.RunToolInput, 40)
	for i := range calls {
		calls[i] = big
	}
	for _, tt := range []struct {
		name     string
		budget   wfapi.InlineContext
		outcomes int
	}{
		{"no time left", wfapi.InlineContext{Time: 0, Bytes: 1 << 20}, 0},
		{"no bytes left", wfapi.InlineContext{Time: time.Minute, Bytes: 0}, 0},
		{"bytes for two results", wfapi.InlineContext{Time: time.Minute, Bytes: 30 << 10}, 2},
		{"MaxInlineBatchBytes (about 22 KB a result)", wfapi.InlineContext{Time: time.Minute, Bytes: wfapi.MaxInlineBatchBytes}, 12},
		{"ample", ample, 40},
	} {
		b := batch(calls, nil, tt.budget)
		if len(b.Outcomes) != tt.outcomes || b.Stop {
			t.Errorf("%s: %d outcomes, stop %v; want %d", tt.name, len(b.Outcomes), b.Stop, tt.outcomes)
		}
	}
	// Nothing written: no step folder.
	if _, err := os.Stat(filepath.Join(rr.RunDir, "steps")); !os.IsNotExist(err) {
		t.Fatalf("an inline evaluation wrote the run's steps folder: %v", err)
	}
}

// TestInlineCommand: a quick idempotent command runs inside the workflow
// task in its step folder (input.json, no envelope file); a slow one is
// killed at its InlineStepTime and left to the local activity, and so is a
// failing one; another host's run and a run the workflow does not own are
// left to it without starting anything.
func TestInlineCommand(t *testing.T) {
	a, root := newActivities(t)
	a.Exec.HostQueue = "q@here"
	a.Exec.InlineStepTime = time.Second // room for a quick command on a loaded machine; the slow one sleeps 5 s
	if err := os.WriteFile(filepath.Join(root, "policy.yaml"), []byte("sandbox: off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	quickTool(root, `grep -q slow "$CAPFLOW_INPUT_PATH" && sleep 5
grep -q fail "$CAPFLOW_INPUT_PATH" && exit 3
exit 0
`)
	e := env(a)
	plan := map[string]any{"name": "p", "steps": []any{map[string]any{"id": "q", "capability": "test.quick"}}}
	rr := resolved(t, e, a, plan)
	if rr.Status != "ready" || !rr.Steps[0].Inline {
		t.Fatalf("%s %s: inline %v", rr.Status, rr.Message, rr.Steps[0].Inline)
	}
	st := rr.Steps[0]
	own := wfapi.InlineContext{WorkflowID: testRun, WorkflowType: wfapi.WorkflowType}
	stepDir := filepath.Join(rr.RunDir, "steps", "q")
	for _, tt := range []struct {
		name    string
		mode    string
		edit    func(*wfapi.RunToolInput)
		ok      bool
		started bool
	}{
		{"a quick command", "quick", nil, true, true},
		{"a failing command", "fail", nil, false, true},
		{"a slow command", "slow", nil, false, true},
		{"another host's run", "quick", func(in *wfapi.RunToolInput) { in.Host = "q@elsewhere" }, false, false},
		{"a run the workflow does not own", "quick", func(in *wfapi.RunToolInput) { in.WorkflowID = "someone-else" }, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.RemoveAll(stepDir)
			in := wfapi.RunToolInput{WorkflowID: testRun, RunDir: rr.RunDir, Host: "q@here",
				Step: wfapi.StepCall{ID: "q", Tool: st.Tool, Version: st.Version, Digest: st.Digest, Idempotent: true, With: map[string]any{"mode": tt.mode}}}
			if tt.edit != nil {
				tt.edit(&in)
			}
			start := time.Now()
			own.Time, own.Bytes = time.Minute, 1<<20
			b := a.Exec.Inline([]wfapi.RunToolInput{in}, nil, own)
			ok := b.Outcomes[0].OK
			var res wfapi.RunToolResult
			if ok {
				res = *b.Outcomes[0].Result
			}
			if ok != tt.ok || (ok && !res.Envelope.Success) {
				t.Fatalf("ok %v, want %v: %+v", ok, tt.ok, res.Envelope)
			}
			if took := time.Since(start); took > 4*time.Second {
				t.Fatalf("took %s: a slow command is killed at its budget", took)
			}
			_, err := os.Stat(filepath.Join(stepDir, "started"))
			if started := err == nil; started != tt.started {
				t.Fatalf("started %v, want %v", started, tt.started)
			}
			if !ok {
				return
			}
			recDir := filepath.Join(filepath.Dir(filepath.Dir(stepDir)), "records", filepath.Base(stepDir))
			if _, err := os.Stat(filepath.Join(recDir, "input.json")); err != nil {
				t.Fatalf("no input record: %v", err)
			}
			if _, err := os.Stat(stepDir + step.EnvelopeSuffix); !os.IsNotExist(err) {
				t.Fatalf("an inline step wrote its envelope file: %v", err)
			}
		})
	}
}

// quickTool writes the project's tool quick (capability test.quick): an
// idempotent inline command that appends "started" to a file of its step
// folder, then runs rest.
func quickTool(root, rest string) {
	tool := filepath.Join(root, "tools", "quick")
	os.MkdirAll(tool, 0o755)
	os.WriteFile(filepath.Join(tool, "run.sh"), []byte("#!/bin/sh\necho started >> \"$CAPFLOW_WORKDIR/started\"\n"+rest), 0o755)
	os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte(`name: quick
version: 1.0.0
description: a quick command
capabilities: [test.quick]
input_schema: {type: object}
output_schema: {type: object}
entrypoint: {type: command, command: [./run.sh], result: exit_code}
idempotent: true
execution: inline
`), 0o644)
}
