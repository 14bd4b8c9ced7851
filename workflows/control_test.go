package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// op is one operator action at a point of workflow time.
type op struct {
	at     time.Duration
	update string
	arg    any
	// want: "" accepted; otherwise a substring of the rejection.
	want string
}

type opResult struct {
	answer wfapi.ControlAnswer
	err    error
}

// control runs a plan with operator updates; approval steps are listed.
func control(t *testing.T, src string, approvals []string, behave map[string]behaviour, ops []op) (*wfapi.Result, *fakes, []opResult, []wfapi.Result) {
	t.Helper()
	rr := resolvedFrom(t, src)
	for i := range rr.Steps {
		for _, a := range approvals {
			if rr.Steps[i].ID == a {
				rr.Steps[i].Approval = true
			}
		}
	}
	f := &fakes{resolved: rr, behave: behave, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	results := make([]opResult, len(ops))
	var progress []wfapi.Result
	for i, o := range ops {
		env.RegisterDelayedCallback(func() {
			if v, err := env.QueryWorkflow(wfapi.ProgressQuery); err == nil {
				var p wfapi.Result
				_ = v.Get(&p)
				progress = append(progress, p)
			}
			env.UpdateWorkflow(o.update, "", &testsuite.TestUpdateCallback{
				OnAccept: func() {},
				OnReject: func(err error) { results[i].err = err },
				OnComplete: func(v any, err error) {
					if err != nil {
						results[i].err = err
						return
					}
					b, _ := json.Marshal(v)
					_ = json.Unmarshal(b, &results[i].answer)
				},
			}, o.arg)
		}, o.at)
	}
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete: %v", env.GetWorkflowError())
	}
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	for i, o := range ops {
		got := results[i].err
		switch {
		case o.want == "" && got != nil:
			t.Fatalf("op %d (%s %+v) rejected: %v", i, o.update, o.arg, got)
		case o.want != "" && (got == nil || !strings.Contains(got.Error(), o.want)):
			t.Fatalf("op %d (%s %+v): got %v, want a rejection saying %q", i, o.update, o.arg, got, o.want)
		}
	}
	return &res, f, results, progress
}

func decide(step string, a wfapi.Action, extra ...string) wfapi.DecideRequest {
	r := wfapi.DecideRequest{Step: step, Action: a, By: "alice"}
	if len(extra) > 0 {
		r.Comment = extra[0]
	}
	return r
}

const gated = `name: gated
steps:
  - {id: build, capability: x.a}
  - {id: gate, capability: flow.approve, needs: [build], with: {prompt: "Ship it?"}}
  - {id: ship, capability: x.b, needs: [gate]}
`

const twoGates = gated + `  - {id: announce, capability: flow.approve, needs: [ship], with: {prompt: "Announce?"}}
`

func TestApprovalGivenAndRefused(t *testing.T) {
	res, f, answers, progress := control(t, twoGates, []string{"gate", "announce"}, nil, []op{
		{at: time.Minute, update: wfapi.UpdateDecide, arg: decide("nope", wfapi.ActionApprove), want: `no step "nope"`},
		{at: time.Minute + time.Second, update: wfapi.UpdateDecide, arg: decide("gaet", wfapi.ActionApprove), want: `no step "gaet" (did you mean "gate"?)`},
		{at: 2 * time.Minute, update: wfapi.UpdateDecide, arg: decide("gate", wfapi.ActionRetry), want: "answer with approve or reject"},
		{at: 3 * time.Minute, update: wfapi.UpdateDecide, arg: wfapi.DecideRequest{Step: "gate", Action: wfapi.ActionApprove}, want: "who made it"},
		{at: 3*time.Minute + time.Second, update: wfapi.UpdateDecide, arg: decide("gate", wfapi.ActionApprove, strings.Repeat("x", wire.MaxDecisionComment+1)), want: "its comment at most 16384"},
		{at: 4 * time.Minute, update: wfapi.UpdateDecide, arg: decide("gate", wfapi.ActionApprove, "looks good")},
		{at: 5 * time.Minute, update: wfapi.UpdateDecide, arg: decide("gate", wfapi.ActionReject), want: "already decided: approved by alice"},
		{at: 6 * time.Minute, update: wfapi.UpdateDecide, arg: decide("announce", wfapi.ActionApprove)},
	})
	if res.Status != wfapi.StatusPassed || states(res) != "build=succeeded gate=succeeded ship=succeeded announce=succeeded" {
		t.Fatalf("%s [%s] %s", res.Status, states(res), res.Message)
	}
	gate := res.Steps[1]
	if d, _ := gate.Envelope.Data.(map[string]any); d["approved"] != true || d["by"] != "alice" || d["comment"] != "looks good" {
		t.Fatalf("approval data %+v", gate.Envelope.Data)
	}
	if len(gate.Decisions) != 1 || gate.Decisions[0].Action != wfapi.ActionApprove || gate.Decisions[0].Wait != "gate#1" {
		t.Fatalf("decisions %+v", gate.Decisions)
	}
	if f.callsOf("gate") != 0 {
		t.Fatal("an approval must not run an activity")
	}
	// While it waited, the progress said for what.
	w := progress[0].Steps[1].Waiting
	if progress[0].Steps[1].Status != wfapi.StepWaiting || w == nil || w.Prompt != "Ship it?" || w.Kind != wfapi.WaitApproval {
		t.Fatalf("progress while waiting: %+v", progress[0].Steps[1])
	}
	if answers[5].answer.State != wfapi.StepSucceeded {
		t.Fatalf("the answer says %+v", answers[5].answer)
	}

	res, _, _, _ = control(t, gated, []string{"gate"}, nil, []op{
		{at: time.Minute, update: wfapi.UpdateDecide, arg: decide("gate", wfapi.ActionReject, "not today")},
	})
	gate = res.Steps[1]
	if res.Status != wfapi.StatusFailed || states(res) != "build=succeeded gate=failed ship=skipped" || caperr.Code(gate.Envelope.Error.Code) != caperr.Rejected ||
		!strings.Contains(gate.Reason, `rejected by alice ("not today")`) {
		t.Fatalf("%s [%s] %+v", res.Status, states(res), gate)
	}
}

func TestApprovalTimesOut(t *testing.T) {
	src := strings.Replace(gated, `prompt: "Ship it?"`, `prompt: "Ship it?", timeout: 2h`, 1)
	res, _, _, _ := control(t, src, []string{"gate"}, nil, nil)
	gate := res.Steps[1]
	if res.Status != wfapi.StatusFailed || gate.Status != wfapi.StepFailed || caperr.Code(gate.Envelope.Error.Code) != caperr.TaskTimeout || !strings.Contains(gate.Reason, "no decision within 2h0m0s") {
		t.Fatalf("%s %+v", res.Status, gate)
	}
}

const asking = `name: asking
failure_policy: continue_all
ask_timeout: 1h
steps:
  - {id: flaky, capability: x.a, on_failure: ask, retry: {max_attempts: 1}}
  - {id: after, capability: x.b, needs: [flaky]}
`

func TestDecisionsOnAFailedStep(t *testing.T) {
	// retry (with a longer timeout): the step runs again and succeeds.
	res, f, _, progress := control(t, asking, nil, map[string]behaviour{"flaky": failOnce()}, []op{
		{at: time.Minute, update: wfapi.UpdateDecide, arg: wfapi.DecideRequest{Step: "flaky", Action: wfapi.ActionRetry, By: "bob", Timeout: "nope"}, want: "not a positive duration"},
		{at: 2 * time.Minute, update: wfapi.UpdateDecide, arg: wfapi.DecideRequest{Step: "flaky", Action: wfapi.ActionRetry, By: "bob", Timeout: "5m"}},
	})
	if res.Status != wfapi.StatusPassed || states(res) != "flaky=succeeded after=succeeded" || f.callsOf("flaky") != 2 {
		t.Fatalf("retry: %s [%s] calls %d", res.Status, states(res), f.callsOf("flaky"))
	}
	// The operator's retry adds to the count: the failed attempt, then the one it ordered.
	if got := res.Steps[0].Attempts; got != 2 {
		t.Fatalf("retry: attempts %d, want 2", got)
	}
	if p := progress[0].Steps[0]; p.Status != wfapi.StepWaiting || p.Waiting.Kind != wfapi.WaitDecision || !strings.Contains(p.Waiting.Prompt, "retry, skip or fail") {
		t.Fatalf("waiting: %+v", p)
	}
	d := res.Steps[0].Decisions
	if len(d) != 1 || d[0].String()[:len("failed TEST_FAILURE → retried by bob")] != "failed TEST_FAILURE → retried by bob" {
		t.Fatalf("decisions %+v", d)
	}
	if got := f.activityIDs["flaky"]; len(got) != 2 || got[1] != "step-flaky-retry-1" || f.timeouts["step-flaky-retry-1"] != 5*time.Minute {
		t.Fatalf("activities %v, timeouts %v", got, f.timeouts)
	}

	// skip: the failure is absorbed, its dependents skip, the run passes.
	res, _, _, _ = control(t, asking, nil, map[string]behaviour{"flaky": fail(caperr.TestFailure)}, []op{
		{at: time.Minute, update: wfapi.UpdateDecide, arg: decide("flaky", wfapi.ActionSkip)},
	})
	if res.Status != wfapi.StatusPassed || states(res) != "flaky=skipped after=skipped" || !strings.Contains(res.Steps[0].Reason, "skipped by alice") {
		t.Fatalf("skip: %s [%s] %q", res.Status, states(res), res.Steps[0].Reason)
	}

	// fail: the step fails as it would have.
	res, _, _, _ = control(t, asking, nil, map[string]behaviour{"flaky": fail(caperr.TestFailure)}, []op{
		{at: time.Minute, update: wfapi.UpdateDecide, arg: decide("flaky", wfapi.ActionFail)},
	})
	if res.Status != wfapi.StatusFailed || states(res) != "flaky=failed after=skipped" || !strings.Contains(res.Steps[0].Reason, "failed by alice") {
		t.Fatalf("fail: %s [%s] %q", res.Status, states(res), res.Steps[0].Reason)
	}

	// No decision: the wait times out (ask_timeout 1h) and the step fails.
	res, _, _, _ = control(t, asking, nil, map[string]behaviour{"flaky": fail(caperr.TestFailure)}, nil)
	if res.Status != wfapi.StatusFailed || res.Steps[0].Status != wfapi.StepFailed || !strings.Contains(res.Steps[0].Reason, "no decision within 1h0m0s") {
		t.Fatalf("timeout: %s %+v", res.Status, res.Steps[0])
	}
}

func TestPauseAndResume(t *testing.T) {
	res, f, answers, progress := control(t, gated, []string{"gate"}, nil, []op{
		{at: time.Minute, update: wfapi.UpdateResume, arg: ControlRequest{By: "carol"}, want: "not paused"},
		{at: 2 * time.Minute, update: wfapi.UpdatePause, arg: ControlRequest{By: "carol"}},
		{at: 3 * time.Minute, update: wfapi.UpdatePause, arg: ControlRequest{By: "dave"}, want: "already paused (by carol)"},
		{at: 4 * time.Minute, update: wfapi.UpdateDecide, arg: decide("gate", wfapi.ActionApprove)},
		// ship is ready but the run is paused: nothing starts.
		{at: 5 * time.Minute, update: wfapi.UpdateResume, arg: ControlRequest{By: "carol"}},
	})
	if res.Status != wfapi.StatusPassed || states(res) != "build=succeeded gate=succeeded ship=succeeded" || f.callsOf("ship") != 1 {
		t.Fatalf("%s [%s]", res.Status, states(res))
	}
	if answers[1].answer.Status != wfapi.StatusPaused || !strings.Contains(answers[1].answer.Message, "paused by carol") {
		t.Fatalf("pause answered %+v", answers[1].answer)
	}
	// Progress when resume came: paused, ship still pending.
	last := progress[4]
	if last.Status != wfapi.StatusPaused || last.Steps[2].Status != wfapi.StepPending {
		t.Fatalf("while paused: %s, ship %s", last.Status, last.Steps[2].Status)
	}
}

// failOnce fails its first call only (an operator's retry is a new
// activity, whose attempt is 1 again).
func failOnce() behaviour {
	var calls atomic.Int32
	return func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		if calls.Add(1) == 1 {
			return fail(caperr.TestFailure)(ctx, attempt)
		}
		return ok(ctx, attempt)
	}
}

const severities = `name: severities
failure_policy: by_severity
steps:
  - {id: warn, capability: x.a, retry: {max_attempts: 1}}
  - {id: high, capability: x.b, retry: {max_attempts: 1}}
  - {id: fine, capability: x.c}
  - {id: last, capability: x.d, needs: [fine]}
`

// by_severity: MEDIUM and LOW are warnings, HIGH waits for a decision,
// CRITICAL stops the run.
func TestBySeverity(t *testing.T) {
	res, _, _, progress := control(t, severities, nil, map[string]behaviour{"warn": fail(caperr.ObservabilityError), "high": fail(caperr.TestFailure)}, []op{
		{at: time.Minute, update: wfapi.UpdateDecide, arg: decide("high", wfapi.ActionSkip)},
	})
	if res.Status != wfapi.StatusPassed || states(res) != "warn=failed high=skipped fine=succeeded last=succeeded" {
		t.Fatalf("%s [%s] %s", res.Status, states(res), res.Message)
	}
	if progress[0].Steps[1].Status != wfapi.StepWaiting || progress[0].Steps[0].Status != wfapi.StepFailed {
		t.Fatalf("HIGH must wait, MEDIUM must not: %s", states(&progress[0]))
	}
	if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "MEDIUM warn failed (OBSERVABILITY_ERROR)") {
		t.Fatalf("warnings %q", res.Warnings)
	}

	res, _, _, _ = control(t, severities, nil, map[string]behaviour{"warn": fail(caperr.ConfigError), "high": block}, nil)
	if res.Status != wfapi.StatusFailed || !strings.HasPrefix(states(res), "warn=failed high=cancelled") || !strings.Contains(res.Message, "step warn failed") {
		t.Fatalf("CRITICAL: %s [%s] %s", res.Status, states(res), res.Message)
	}
}

// A rerun offers reuse to every step but From and what lies downstream.
func TestRerunOffersReuse(t *testing.T) {
	f := &fakes{resolved: resolvedFrom(t, fmtS(diamond, "fail_fast", "{policy: all}")), calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}, Reuse: &wfapi.Reuse{WorkflowID: "old-run", From: "b"}})
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	got := ""
	for _, id := range []string{"a", "b", "c", "d"} {
		got += id + "=" + f.inputs[id].Step.ReuseFrom + " "
	}
	if got != "a=old-run b= c=old-run d= " {
		t.Fatalf("reuse offered: %s", got)
	}
}

// A met any/quorum join says how it was met.
func TestJoinNote(t *testing.T) {
	res, _ := execute(t, fmtS(diamond, "fail_fast", "{policy: quorum, min: 1}"), map[string]behaviour{"c": fail(caperr.TestFailure)})
	if d := res.Steps[3]; d.Status != wfapi.StepSucceeded || d.JoinNote != "quorum: 1/2 (50%) met, continuing" {
		t.Fatalf("d: %s %q", d.Status, d.JoinNote)
	}
	res, _ = execute(t, fmtS(diamond, "fail_fast", "{policy: all}"), nil)
	if d := res.Steps[3]; d.JoinNote != "" {
		t.Fatalf("an all join needs no note: %q", d.JoinNote)
	}
}

// One host per run: every step goes to the host queue Resolve named.
func TestStepsRunOnTheRunsHost(t *testing.T) {
	rr := resolvedFrom(t, fmtS(diamond, "fail_fast", "{policy: all}"))
	rr.HostQueue = "capflow@host-1"
	rr.Steps[2].TaskQueue = "gpu" // a tool that names its own queue keeps it
	f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if f.queues["a"] != "capflow@host-1" || f.queues["b"] != "capflow@host-1" || f.queues["c"] != "gpu" {
		t.Fatalf("queues %v", f.queues)
	}
}

// Cancelling a paused run whose step waits ends it at once, cancelled.
func TestCancelWhilePaused(t *testing.T) {
	rr := resolvedFrom(t, gated)
	rr.Steps[1].Approval = true
	f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(wfapi.UpdatePause, "", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(error) {}, OnComplete: func(any, error) {}}, ControlRequest{By: "x"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		// ship becomes ready while paused: nothing runs, nothing waits.
		env.UpdateWorkflow(wfapi.UpdateDecide, "", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(error) {}, OnComplete: func(any, error) {}}, decide("gate", wfapi.ActionApprove))
	}, 2*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 3*time.Minute)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != wfapi.StatusCancelled || res.Steps[2].Status != wfapi.StepCancelled || res.DurationMS > int64(time.Hour/time.Millisecond) {
		t.Fatalf("%s [%s] after %d ms", res.Status, states(&res), res.DurationMS)
	}
}
