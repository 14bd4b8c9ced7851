package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// What a client may send: anything else ends the run failed with
// INVALID_INPUT naming the field, before any activity (nothing is read,
// written or run, not even a report).
func TestClientInputBoundary(t *testing.T) {
	forged := `{"segment": 1, "first_run_id": "r", "states": "p", "resolved": {"status": "ready", "run_dir": "/",
		"steps": [{"id": "w", "capability": "file.write", "tool": "file-write", "version": "1.0.0", "digest": "sha256:real"}]}}`
	for _, c := range []struct {
		name, input, field string
		continued          string // the server's ContinuedExecutionRunID
		message            string // in the first problem, when set
	}{
		{name: "a forged carry", input: `{"resume": ` + forged + `}`, field: "resume"},
		{name: "a forged carry beside a plan", input: `{"plan": {"name": "x"}, "resume": ` + forged + `}`, field: "resume"},
		{name: "a carry reference of another run", input: `{"carry": {"name": "carry-1.json", "sha256": "00", "size": 2, "parts": 1, "segment": 1, "from": "x"}}`,
			field: "carry", continued: "earlier-run"},
		{name: "a carry reference from a client", input: `{"carry": {"name": "carry-1.json", "sha256": "00", "size": 2, "parts": 1, "segment": 1}}`, field: "carry"},
		{name: "a parent's inputs from a client", input: `{"plan": {"name": "x"}, "parent_inputs": {"name": "input-00.json", "sha256": "00", "size": 2, "parts": 1}}`, field: "parent_inputs"},
		// A lineage from a client would let it pass for another run's chain
		// (and have a reset's guard refuse, or allow, what it should not).
		{name: "a lineage from a client", input: `{"plan": {"name": "x"}, "lineage": "0190-some-other-run"}`, field: "lineage", message: "engine's own"},
		{name: "an unknown option", input: `{"plan": {"name": "x"}, "run_dir": "/"}`, field: "run_dir"},
		{name: "inputs of the wrong type", input: `{"plan": {"name": "x"}, "inputs": "x"}`, field: "inputs"},
		{name: "a plan file of the wrong type", input: `{"plan_file": 7}`, field: "plan_file"},
		{name: "reuse without a run", input: `{"plan": {"name": "x"}, "reuse": {"from": "a"}}`, field: "reuse.workflow_id"},
		{name: "a carry reference that is a path", input: `{"carry": {"name": "../../etc/passwd", "sha256": "00", "size": 2, "parts": 1, "segment": 1, "from": "earlier-run"}}`,
			field: "carry.name", continued: "earlier-run"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakes{resolved: resolvedFrom(t, "name: x\nsteps:\n  - {id: a, capability: x.a}\n"), behave: map[string]behaviour{},
				calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
			env := newEnv(t, f)
			activities := 0
			env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { activities++ })
			env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) { activities++ })
			if c.continued != "" {
				env.SetContinuedExecutionRunID(c.continued)
			}
			env.ExecuteWorkflow(wfapi.WorkflowType, json.RawMessage(c.input))
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow did not complete: %v", env.GetWorkflowError())
			}
			var res wfapi.Result
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Status != wfapi.StatusFailed || !strings.HasPrefix(res.Message, string(caperr.InvalidInput)+":") {
				t.Fatalf("%s: %s", res.Status, res.Message)
			}
			if len(res.Problems) == 0 || res.Problems[0].Field != c.field || caperr.Code(res.Problems[0].Code) != caperr.InvalidInput ||
				!strings.Contains(res.Problems[0].Message, c.message) {
				t.Fatalf("problems %+v, want field %s first (%q)", res.Problems, c.field, c.message)
			}
			if activities != 0 || f.finalized != nil || len(f.calls) != 0 {
				t.Fatalf("%d activities ran (finalized %v, calls %v): nothing may run", activities, f.finalized != nil, f.calls)
			}
		})
	}
}

// A continued run accepts only a carry whose stored bytes match the digest
// the previous segment recorded.
func TestCarryMustMatchItsDigest(t *testing.T) {
	rr := resolvedFrom(t, chainOfTen("long"))
	f := &segmentFakes{fakes: &fakes{resolved: rr, behave: map[string]behaviour{}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}},
		checkpoints: map[int][]wfapi.StepResult{}, blobs: map[string][]byte{"carry-1.json": []byte(`{"segment": 1}`)}}
	env := newEnv(t, f.fakes)
	env.RegisterActivityWithOptions(f.GetBlob, activity.RegisterOptions{Name: wfapi.GetBlobActivity})
	env.SetContinuedExecutionRunID("earlier-run")
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Start{Carry: &wfapi.CarryRef{Segment: 1, From: "earlier-run",
		Blob: wfapi.Blob{Name: "carry-1.json", SHA256: strings.Repeat("0", 64), Size: 14, Parts: 1}}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != wfapi.StatusFailed || !strings.Contains(res.Message, "does not match the digest") {
		t.Fatalf("%s: %s", res.Status, res.Message)
	}
	if len(f.calls) != 0 {
		t.Fatalf("steps ran: %v", f.calls)
	}
}

// A batch of items started by a client, not by its run, runs nothing.
func TestItemsWorkflowRunsOnlyUnderItsRun(t *testing.T) {
	f := &fakes{resolved: resolvedFrom(t, "name: x\nsteps:\n  - {id: a, capability: x.a}\n"), behave: map[string]behaviour{}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.ItemsWorkflowType, wfapi.ItemsInput{WorkflowID: "victim", Step: f.resolved.Steps[0],
		Items: []wfapi.BatchItem{{Index: 0, Value: "x", HasValue: true}}, MaxParallel: 1, StopAfterFailures: -1})
	if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "only as a batch") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if len(f.calls) != 0 {
		t.Fatalf("items ran: %v", f.calls)
	}
}
