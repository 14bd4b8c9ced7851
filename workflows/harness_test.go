package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/activities"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/expr"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/verdict"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// The test harness: fake activities whose behaviour each test sets.

// behaviour scripts one step of the fake RunTool.
type behaviour func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error)

func ok(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
	info := activity.GetInfo(ctx)
	return &wfapi.RunToolResult{Attempt: attempt, Envelope: envelope.Envelope{ToolID: "t", Success: true, Message: "ok " + info.ActivityID,
		Timestamp: "2026-11-21T00:00:00Z", Data: map[string]any{"step": info.ActivityID}}}, nil
}

func fail(code caperr.Code) behaviour {
	return func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		env := envelope.NewBuilder("t").Fail(code, "boom: "+string(code), nil)
		res := &wfapi.RunToolResult{Envelope: env, Attempt: attempt}
		return nil, temporal.NewApplicationErrorWithOptions(env.Message, string(code), temporal.ApplicationErrorOptions{
			NonRetryable: !caperr.Lookup(code).Retryable, Details: []any{res}})
	}
}

func failTimes(n int32, code caperr.Code) behaviour {
	return func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		if attempt <= n {
			return fail(code)(ctx, attempt)
		}
		return ok(ctx, attempt)
	}
}

// block runs until cancelled (heartbeating so cancellation arrives).
func block(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, activities.Interrupted(ctx, &wfapi.RunToolResult{Attempt: attempt}, wfapi.Heartbeat{Attempt: attempt})
		case <-time.After(20 * time.Millisecond):
			activity.RecordHeartbeat(ctx, wfapi.Heartbeat{Attempt: attempt})
		}
	}
}

func sleep(d time.Duration) behaviour {
	return func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		select {
		case <-ctx.Done():
			return nil, activities.Interrupted(ctx, &wfapi.RunToolResult{Attempt: attempt}, wfapi.Heartbeat{Attempt: attempt})
		case <-time.After(d):
		}
		return ok(ctx, attempt)
	}
}

type fakes struct {
	resolved  *wfapi.ResolveResult
	behave    map[string]behaviour
	mu        sync.Mutex
	calls     map[string]int
	inputs    map[string]wfapi.RunToolInput
	running   int
	peak      int
	finalized *wfapi.FinalizeInput
	// activityIDs: each step's activities in order; timeouts: each
	// activity's start-to-close timeout.
	activityIDs map[string][]string
	timeouts    map[string]time.Duration
	queues      map[string]string
	// seen: each key's RunTool calls in order.
	seen map[string][]seenCall
	// first, when set, is what Resolve evaluates ahead when asked.
	first func(*wfapi.ResolveResult) []wfapi.InlineAhead
	// next is what Finalize says to do next.
	next []wire.Next
}

// seenCall is one RunTool call: its input, queue and activity ID.
type seenCall struct {
	in        wfapi.RunToolInput
	queue, id string
}

// callsOf is how many times key ran, read under the lock: a cancelled
// activity may still be ending when its workflow did.
func (f *fakes) callsOf(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

func (f *fakes) Resolve(ctx context.Context, in wfapi.ResolveInput) (*wfapi.ResolveResult, error) {
	if !in.CarrySteps {
		// The workflow carries steps Resolve did not store (segments.go).
		return nil, temporal.NewNonRetryableApplicationError("the workflow did not say it carries its steps", "TEST", nil)
	}
	if in.Ahead && f.first != nil {
		rr := *f.resolved
		rr.Ahead = f.first(&rr)
		return &rr, nil
	}
	return f.resolved, nil
}

func (f *fakes) RunTool(ctx context.Context, in wfapi.RunToolInput) (*wfapi.RunToolResult, error) {
	key := in.Step.ID
	if it := in.Step.Item; it != nil {
		key = wfapi.ItemLabel(in.Step.ID, it.Index)
	}
	f.mu.Lock()
	f.calls[key]++
	f.inputs[key] = in
	if f.seen == nil {
		f.seen = map[string][]seenCall{}
	}
	f.seen[key] = append(f.seen[key], seenCall{in: in, queue: activity.GetInfo(ctx).TaskQueue, id: activity.GetInfo(ctx).ActivityID})
	if info := activity.GetInfo(ctx); in.Step.Item == nil {
		if f.activityIDs == nil {
			f.activityIDs, f.timeouts, f.queues = map[string][]string{}, map[string]time.Duration{}, map[string]string{}
		}
		f.activityIDs[key] = append(f.activityIDs[key], info.ActivityID)
		f.queues[key] = info.TaskQueue
		f.timeouts[info.ActivityID] = info.Deadline.Sub(info.StartedTime).Round(time.Second)
	}
	f.running++
	if f.running > f.peak {
		f.peak = f.running
	}
	b := f.behave[key]
	if b == nil {
		b = f.behave[in.Step.ID]
	}
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.running--; f.mu.Unlock() }()
	if b == nil {
		b = ok
	}
	return b(ctx, activity.GetInfo(ctx).Attempt+in.AttemptsBefore) // as RunTool counts
}

// Evaluate evaluates lists and conditions as the real activity does, over
// the inline data the fakes produce.
func (f *fakes) Evaluate(ctx context.Context, in wfapi.EvaluateInput) (*wfapi.EvaluateResult, error) {
	f.mu.Lock()
	f.calls["decide-"+in.StepID]++
	f.mu.Unlock()
	scope := plan.Scope{Inputs: in.Inputs, Steps: map[string]plan.StepOutcome{}}
	for id, o := range in.Deps {
		scope.Steps[id] = plan.StepOutcome{Success: o.Success, Data: o.Data}
	}
	steps := wfapi.Conditions(in.Deps, func(id string) any { return in.Deps[id].Data })
	if in.ForEach == nil {
		run, err := expr.Eval(in.When, in.Inputs, steps, "", nil, 0)
		return &wfapi.EvaluateResult{Run: run}, err
	}
	v, err := scope.Eval(in.ForEach)
	if err != nil {
		return nil, err
	}
	list, _ := v.([]any)
	out := &wfapi.EvaluateResult{Count: len(list), Run: true}
	for i, item := range list {
		if in.When == "" {
			continue
		}
		ok, err := expr.Eval(in.When, in.Inputs, steps, in.ItemName, item, i)
		if err != nil {
			return nil, err
		}
		if !ok {
			out.Skip = append(out.Skip, i)
		}
	}
	return out, nil
}

func (f *fakes) Finalize(ctx context.Context, in wfapi.FinalizeInput) (*wfapi.Finalized, error) {
	f.mu.Lock()
	f.finalized = &in
	f.mu.Unlock()
	return &wfapi.Finalized{ReportPaths: wfapi.ReportPaths{JSON: "/runs/x/report.json", Markdown: "/runs/x/report.md"}, Next: f.next}, nil
}

// resolvedFrom turns a plan into what Resolve would return, with fast
// retries so tests do not wait.
func resolvedFrom(t *testing.T, src string) *wfapi.ResolveResult {
	t.Helper()
	p, probs := plan.Parse("p.yaml", []byte(src))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	rr := &wfapi.ResolveResult{Status: verdict.Ready, Plan: p.Name, FailurePolicy: p.FailurePolicy, MaxParallel: 16, RunDir: "/runs/x",
		Gaps: []wire.Gap{}, Inputs: map[string]any{}}
	if p.MaxParallel > 0 {
		rr.MaxParallel = p.MaxParallel
	}
	rr.Inputs, _, _ = p.ResolveInputs(nil, false)
	rr.AskTimeout = p.AskTimeout.D()
	for _, s := range p.Steps {
		st := preflight.Settings(p, s, nil)
		rr.Steps = append(rr.Steps, wfapi.ResolvedStep{ID: s.ID, Capability: s.Capability, Tool: "tool-" + s.ID, Version: "1.0.0",
			Deps: s.Deps, Join: s.Join, OnFailure: s.OnFailure, Critical: s.Critical, With: s.With, Idempotent: true,
			ForEach: s.ForEach, MaxParallel: s.MaxParallel, Tolerate: s.Tolerate, When: s.When, ItemName: itemName(s),
			StepSettings: plan.StepSettings{Timeout: st.Timeout, Heartbeat: st.Heartbeat, MaxAttempts: st.MaxAttempts,
				InitialInterval: time.Millisecond, Backoff: 1, MaxInterval: time.Millisecond},
			Summary: wfapi.StepSummary(s.ID, s.Capability, "tool-"+s.ID, "1.0.0")})
	}
	return rr
}

func newEnv(t *testing.T, f *fakes) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(PlanWorkflow, workflow.RegisterOptions{Name: wfapi.WorkflowType})
	env.RegisterWorkflowWithOptions(ItemsWorkflow, workflow.RegisterOptions{Name: wfapi.ItemsWorkflowType})
	env.RegisterActivityWithOptions(f.Resolve, activity.RegisterOptions{Name: wfapi.ResolveActivity})
	env.RegisterActivityWithOptions(f.RunTool, activity.RegisterOptions{Name: wfapi.RunToolActivity})
	env.RegisterActivityWithOptions(f.Evaluate, activity.RegisterOptions{Name: wfapi.EvaluateActivity})
	env.RegisterActivityWithOptions(f.Finalize, activity.RegisterOptions{Name: wfapi.FinalizeActivity})
	env.SetTestTimeout(30 * time.Second)
	return env
}

func execute(t *testing.T, src string, behave map[string]behaviour) (*wfapi.Result, *fakes) {
	t.Helper()
	f := &fakes{resolved: resolvedFrom(t, src), behave: behave, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete: %v", env.GetWorkflowError())
	}
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if f.finalized == nil {
		t.Fatal("Finalize was not called")
	}
	return &res, f
}

func states(res *wfapi.Result) string {
	var parts []string
	for _, s := range res.Steps {
		parts = append(parts, s.ID+"="+string(s.Status))
	}
	return strings.Join(parts, " ")
}

const diamond = `name: diamond
failure_policy: %s
steps:
  - {id: a, capability: x.a}
  - {id: b, capability: x.b, needs: [a]}
  - {id: c, capability: x.c, needs: [a]}
  - {id: d, capability: x.d, needs: [b, c], join: %s}
`
