package workflows

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/expr"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/wfapi"
)

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
			return nil, temporal.NewCanceledError(&wfapi.RunToolResult{Attempt: attempt}) // as RunTool does
		case <-time.After(20 * time.Millisecond):
			activity.RecordHeartbeat(ctx, wfapi.Heartbeat{Attempt: attempt})
		}
	}
}

func sleep(d time.Duration) behaviour {
	return func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		select {
		case <-ctx.Done():
			return nil, temporal.NewCanceledError(&wfapi.RunToolResult{Attempt: attempt}) // as RunTool does
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
}

func (f *fakes) Resolve(ctx context.Context, in wfapi.ResolveInput) (*wfapi.ResolveResult, error) {
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

// Decide evaluates lists and conditions as the real activity does, over
// the inline data the fakes produce.
func (f *fakes) Decide(ctx context.Context, in wfapi.DecideInput) (*wfapi.DecideResult, error) {
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
		return &wfapi.DecideResult{Run: run}, err
	}
	v, err := scope.Eval(in.ForEach)
	if err != nil {
		return nil, err
	}
	list, _ := v.([]any)
	out := &wfapi.DecideResult{Count: len(list), Run: true}
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

func (f *fakes) Finalize(ctx context.Context, in wfapi.FinalizeInput) (*wfapi.ReportPaths, error) {
	f.mu.Lock()
	f.finalized = &in
	f.mu.Unlock()
	return &wfapi.ReportPaths{JSON: "/runs/x/report.json", Markdown: "/runs/x/report.md"}, nil
}

// resolvedFrom turns a plan into what Resolve would return, with fast
// retries so tests do not wait.
func resolvedFrom(t *testing.T, src string) *wfapi.ResolveResult {
	t.Helper()
	p, probs := plan.Parse("p.yaml", []byte(src))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	rr := &wfapi.ResolveResult{Status: preflight.Ready, Plan: p.Name, FailurePolicy: p.FailurePolicy, MaxParallel: 16, RunDir: "/runs/x",
		Gaps: []gap.Gap{}, Inputs: map[string]any{}}
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
			StepSettings: preflight.StepSettings{Timeout: st.Timeout, Heartbeat: st.Heartbeat, MaxAttempts: st.MaxAttempts,
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
	env.RegisterActivityWithOptions(f.Decide, activity.RegisterOptions{Name: wfapi.DecideActivity})
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

func TestJoinsAndPolicies(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		join   string
		behave map[string]behaviour
		status string
		states string
	}{
		{"all pass", "fail_fast", "{policy: all}", nil, "passed", "a=succeeded b=succeeded c=succeeded d=succeeded"},
		{"all join, branch fails", "continue_all", "{policy: all}", map[string]behaviour{"b": fail(caperr.TestFailure)}, "failed",
			"a=succeeded b=failed c=succeeded d=skipped"},
		{"any join absorbs a failure", "fail_fast", "{policy: any}", map[string]behaviour{"b": fail(caperr.TestFailure)}, "passed",
			"a=succeeded b=failed c=succeeded d=succeeded"},
		{"quorum 1 of 2 absorbs", "fail_fast", "{policy: quorum, min: 1}", map[string]behaviour{"c": fail(caperr.TestFailure)}, "passed",
			"a=succeeded b=succeeded c=failed d=succeeded"},
		{"quorum threshold unmet", "continue_all", "{policy: quorum, threshold: 1.0}", map[string]behaviour{"c": fail(caperr.TestFailure)}, "failed",
			"a=succeeded b=succeeded c=failed d=skipped"},
		{"any join, both fail", "continue_all", "{policy: any}", map[string]behaviour{"b": fail(caperr.TestFailure), "c": fail(caperr.TestFailure)}, "failed",
			"a=succeeded b=failed c=failed d=skipped"},
		{"root failure skips everything", "continue_all", "{policy: all}", map[string]behaviour{"a": fail(caperr.TestFailure)}, "failed",
			"a=failed b=skipped c=skipped d=skipped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := execute(t, fmtS(diamond, tt.policy, tt.join), tt.behave)
			if string(res.Status) != tt.status || states(res) != tt.states {
				t.Fatalf("got %s [%s], want %s [%s] (%s)", res.Status, states(res), tt.status, tt.states, res.Message)
			}
			// A quorum/any join that can no longer be met says so by code;
			// an all join's skip carries no error of its own.
			d := res.Steps[3]
			if d.Status == "skipped" {
				joinUnmet := !strings.Contains(tt.join, "all")
				got := d.Envelope != nil && d.Envelope.Error != nil && d.Envelope.Error.Code == caperr.QuorumNotMet
				if got != joinUnmet {
					t.Fatalf("skipped %s join: QUORUM_NOT_MET=%v, want %v (%+v)", tt.join, got, joinUnmet, d.Envelope)
				}
				if got && strings.HasPrefix(d.Envelope.Timestamp, "1970") {
					t.Fatalf("workflow-made envelope has epoch time: %s", d.Envelope.Timestamp)
				}
			}
		})
	}
}

func fmtS(f string, a ...any) string {
	out := f
	for _, x := range a {
		out = strings.Replace(out, "%s", x.(string), 1)
	}
	return out
}

const siblings = `name: siblings
failure_policy: %s
steps:
  - {id: bad, capability: x.bad, on_failure: fail, critical: %s}
  - {id: slow, capability: x.slow}
  - {id: later, capability: x.later, needs: [bad]}
  - {id: other, capability: x.other, needs: [slow]}
`

func TestFailFastCancelsRunningSiblings(t *testing.T) {
	res, f := execute(t, fmtS(siblings, "fail_fast", "false"), map[string]behaviour{"bad": fail(caperr.TestFailure), "slow": block})
	if res.Status != "failed" || states(res) != "bad=failed slow=cancelled later=skipped other=skipped" {
		t.Fatalf("%s [%s]", res.Status, states(res))
	}
	// The cancelled step ran once: its envelope says so, with workflow time.
	if slow := res.Steps[1]; slow.Attempts != 1 || strings.HasPrefix(slow.Envelope.Timestamp, "1970") || slow.Envelope.Error.Code != caperr.Cancelled {
		t.Fatalf("cancelled step: attempts %d, envelope %+v", slow.Attempts, slow.Envelope)
	}
	if f.calls["other"] != 0 || f.calls["later"] != 0 {
		t.Fatal("steps after a fail_fast stop must not start")
	}
	if !strings.Contains(res.Steps[1].Reason, "fail_fast: step bad failed") {
		t.Fatalf("cancel reason: %q", res.Steps[1].Reason)
	}
}

func TestContinueAllRunsIndependentBranches(t *testing.T) {
	res, _ := execute(t, fmtS(siblings, "continue_all", "false"), map[string]behaviour{"bad": fail(caperr.TestFailure), "slow": sleep(50 * time.Millisecond)})
	if res.Status != "failed" || states(res) != "bad=failed slow=succeeded later=skipped other=succeeded" {
		t.Fatalf("%s [%s]", res.Status, states(res))
	}
}

func TestCriticalPath(t *testing.T) {
	res, _ := execute(t, fmtS(siblings, "critical_path", "false"), map[string]behaviour{"bad": fail(caperr.TestFailure)})
	if res.Status != "passed" || states(res) != "bad=failed slow=succeeded later=skipped other=succeeded" {
		t.Fatalf("non-critical failure: %s [%s]", res.Status, states(res))
	}
	res, _ = execute(t, fmtS(siblings, "critical_path", "true"), map[string]behaviour{"bad": fail(caperr.TestFailure), "slow": block})
	if res.Status != "failed" || states(res) != "bad=failed slow=cancelled later=skipped other=skipped" {
		t.Fatalf("critical failure: %s [%s]", res.Status, states(res))
	}
	// A critical step skipped because of a tolerated failure upstream still fails the run.
	src := "name: cp\nfailure_policy: critical_path\nsteps:\n  - {id: opt, capability: x.a, on_failure: fail}\n  - {id: must, capability: x.b, needs: [opt], critical: true}\n"
	res, _ = execute(t, src, map[string]behaviour{"opt": fail(caperr.TestFailure)})
	if res.Status != "failed" || states(res) != "opt=failed must=skipped" || !strings.Contains(res.Message, "must skipped") {
		t.Fatalf("critical skipped: %s [%s] %s", res.Status, states(res), res.Message)
	}
}

func TestOnFailureSkip(t *testing.T) {
	src := "name: s\nsteps:\n  - {id: flaky, capability: x.a, on_failure: skip}\n  - {id: after, capability: x.b}\n"
	res, f := execute(t, src, map[string]behaviour{"flaky": fail(caperr.ToolFailure)})
	if res.Status != "passed" || states(res) != "flaky=skipped after=succeeded" || f.calls["flaky"] != 1 {
		t.Fatalf("%s [%s] calls=%d", res.Status, states(res), f.calls["flaky"])
	}
}

func TestRetries(t *testing.T) {
	src := "name: r\nsteps:\n  - {id: s, capability: x.a, retry: {max_attempts: 3}}\n"
	res, f := execute(t, src, map[string]behaviour{"s": failTimes(2, caperr.ToolFailure)})
	if res.Status != "passed" || f.calls["s"] != 3 || res.Steps[0].Attempts != 3 {
		t.Fatalf("retryable: %s calls=%d attempts=%d", res.Status, f.calls["s"], res.Steps[0].Attempts)
	}
	res, f = execute(t, src, map[string]behaviour{"s": fail(caperr.SchemaViolation)})
	if res.Status != "failed" || f.calls["s"] != 1 || res.Steps[0].Envelope.Error.Code != caperr.SchemaViolation {
		t.Fatalf("non-retryable code must not be retried: calls=%d %+v", f.calls["s"], res.Steps[0])
	}
	res, f = execute(t, src, map[string]behaviour{"s": fail(caperr.ToolFailure)})
	last := res.Steps[0].Envelope.Feedback[len(res.Steps[0].Envelope.Feedback)-1]
	if f.calls["s"] != 3 || last.Detail != string(caperr.RetryExhausted) {
		t.Fatalf("exhausted: calls=%d last feedback %+v", f.calls["s"], last)
	}
	if e := res.Steps[0].Envelope.Error; e.Code != caperr.RetryExhausted || e.Cause != caperr.ToolFailure || res.Steps[0].Attempts != 3 {
		t.Fatalf("exhausted step: error %+v attempts %d", e, res.Steps[0].Attempts)
	}
}

func TestDataFlowsToDependents(t *testing.T) {
	src := "name: d\nsteps:\n  - {id: a, capability: x.a}\n  - {id: b, capability: x.b, with: {v: '${steps.a.data.step}'}}\n"
	_, f := execute(t, src, nil)
	in := f.inputs["b"]
	if !in.Deps["a"].Success || in.Deps["a"].Data.(map[string]any)["step"] != "step-a" || in.Step.With["v"] != "${steps.a.data.step}" {
		t.Fatalf("deps passed to b: %+v", in.Deps)
	}
	if len(f.inputs["a"].Deps) != 0 || f.inputs["a"].Inputs != nil {
		t.Fatalf("a references nothing and must carry nothing: %+v", f.inputs["a"])
	}
}

func TestStepTimeout(t *testing.T) {
	src := "name: t\nsteps:\n  - {id: hang, capability: x.a, timeout: 1s, on_failure: fail}\n"
	res, _ := execute(t, src, map[string]behaviour{"hang": sleep(time.Hour)})
	if res.Status != "failed" || res.Steps[0].Envelope.Error.Code != caperr.TaskTimeout {
		t.Fatalf("%s %+v", res.Status, res.Steps[0].Envelope)
	}
}

func TestMaxParallel(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: fan\nmax_parallel: 3\nsteps:\n")
	behave := map[string]behaviour{}
	for i := 0; i < 10; i++ {
		id := string(rune('a' + i))
		b.WriteString("  - {id: " + id + ", capability: x.y}\n")
		behave[id] = sleep(20 * time.Millisecond)
	}
	res, f := execute(t, b.String(), behave)
	if res.Status != "passed" || f.peak > 3 || f.peak < 2 {
		t.Fatalf("%s peak=%d", res.Status, f.peak)
	}
}

func TestMaxRunSeconds(t *testing.T) {
	f := &fakes{resolved: resolvedFrom(t, "name: m\nsteps:\n  - {id: s, capability: x.a}\n"), behave: map[string]behaviour{"s": block}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	f.resolved.MaxRunSeconds = 2
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "m"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "failed" || !strings.Contains(res.Message, "max_run_seconds (2s) exceeded") || res.Steps[0].Status != "cancelled" {
		t.Fatalf("%s %s [%s]", res.Status, res.Message, states(&res))
	}
}

func TestDeadlineDoesNotHoldAFinishedRun(t *testing.T) {
	// Every step is skipped or done quickly; the run must not wait for its
	// one-hour deadline timer.
	f := &fakes{resolved: resolvedFrom(t, "name: q\nsteps:\n  - {id: a, capability: x.a, on_failure: fail}\n  - {id: b, capability: x.b, needs: [a]}\n"),
		behave: map[string]behaviour{"a": fail(caperr.TestFailure)}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	f.resolved.MaxRunSeconds = 3600
	env := newEnv(t, f)
	start := env.Now()
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "q"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "failed" || env.Now().Sub(start) > time.Minute {
		t.Fatalf("%s after %s of workflow time", res.Status, env.Now().Sub(start))
	}
}

func TestCancellationAndProgress(t *testing.T) {
	src := "name: c\nsteps:\n  - {id: first, capability: x.a}\n  - {id: slow, capability: x.b, needs: [first]}\n  - {id: last, capability: x.c, needs: [slow]}\n"
	f := &fakes{resolved: resolvedFrom(t, src), behave: map[string]behaviour{"slow": block}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	// With a run deadline too: its timer is cancelled with the run, and the
	// scheduler must not spin on the cancelled timer (a real bug once).
	f.resolved.MaxRunSeconds = 3600
	env := newEnv(t, f)
	var progress wfapi.Result
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(wfapi.ProgressQuery)
		if err != nil {
			t.Errorf("query: %v", err)
			return
		}
		_ = v.Get(&progress)
		env.CancelWorkflow()
	}, time.Second)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "c"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if progress.Status != "running" || states(&progress) != "first=succeeded slow=running last=pending" {
		t.Fatalf("progress: %s [%s]", progress.Status, states(&progress))
	}
	if res.Status != "cancelled" || states(&res) != "first=succeeded slow=cancelled last=cancelled" {
		t.Fatalf("result: %s [%s]", res.Status, states(&res))
	}
	if f.finalized == nil || f.finalized.Result.Status != "cancelled" {
		t.Fatal("a cancelled run must still be finalized")
	}
	if res.Report.Markdown != "/runs/x/report.md" {
		t.Fatalf("report paths: %+v", res.Report)
	}
}

func TestGapsRunNothing(t *testing.T) {
	rr := resolvedFrom(t, "name: g\nsteps:\n  - {id: dl, capability: youtube.download}\n  - {id: up, capability: drive.upload, needs: [dl]}\n")
	rr.Status, rr.Message = preflight.PartialComplete, "1 of 2 steps are not covered"
	rr.Gaps = []gap.Gap{{StepID: "dl", MissingCapability: "youtube.download", Reason: gap.NoCapabilityMatch}}
	f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "g"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "partial-complete" || len(f.calls) != 0 || len(res.Gaps) != 1 || states(&res) != "dl=blocked up=blocked" || res.Steps[0].Reason != "gap: no_capability_match" {
		t.Fatalf("%s calls=%v [%s]", res.Status, f.calls, states(&res))
	}
}

func TestNoPlanNoRequest(t *testing.T) {
	f := &fakes{calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil || res.Status != "invalid" {
		t.Fatalf("%v %+v", err, res)
	}
}

// Seed 003 contract 7: a stored output found missing or altered is
// re-created by re-running its idempotent producer; a non-idempotent one
// is never run twice, and the consumer fails naming the file.
func TestLostStoredOutput(t *testing.T) {
	src := "name: l\nsteps:\n  - {id: a, capability: x.a}\n  - {id: b, capability: x.b, with: {v: '${steps.a.data.big}'}}\n"
	stored := func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		return &wfapi.RunToolResult{Envelope: envelope.NewBuilder("t").Succeed("ok", map[string]any{"data_file": "/runs/x/a.json"}),
			DataFile: "/runs/x/a.json", DataSHA256: "abc123", Attempt: attempt}, nil
	}
	lostOnce := 0
	var mu sync.Mutex
	consumer := func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		lostOnce++
		if lostOnce > 1 {
			return ok(ctx, attempt)
		}
		env := envelope.NewBuilder("t").Fail(caperr.ObservabilityError, "the stored output of step a, /runs/x/a.json, is missing", nil)
		return nil, temporal.NewApplicationErrorWithOptions(env.Message, string(caperr.ObservabilityError), temporal.ApplicationErrorOptions{
			NonRetryable: true, Details: []any{&wfapi.RunToolResult{Envelope: env, Attempt: attempt, LostData: []string{"a"}}}})
	}
	f := &fakes{resolved: resolvedFrom(t, src), behave: map[string]behaviour{"a": stored, "b": consumer}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != wfapi.StatusPassed || f.calls["a"] != 2 || f.calls["b"] != 2 {
		t.Fatalf("idempotent producer: %s [%s] calls a=%d b=%d", res.Status, states(&res), f.calls["a"], f.calls["b"])
	}
	if got := f.inputs["b"].Deps["a"]; got.DataSHA256 != "abc123" || got.DataFile != "/runs/x/a.json" {
		t.Fatalf("the consumer must get the recorded digest: %+v", got)
	}

	// Not idempotent: a runs once, b fails with the code and the file.
	lostOnce = 0
	rr := resolvedFrom(t, src)
	rr.Steps[0].Idempotent = false
	f = &fakes{resolved: rr, behave: map[string]behaviour{"a": stored, "b": consumer}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env = newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	res = wfapi.Result{}
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	b := res.Steps[1]
	if res.Status != wfapi.StatusFailed || f.calls["a"] != 1 || b.Envelope.Error.Code != caperr.ObservabilityError || !strings.Contains(b.Envelope.Message, "/runs/x/a.json") {
		t.Fatalf("non-idempotent producer: %s calls a=%d, b=%+v", res.Status, f.calls["a"], b.Envelope)
	}
}

func itemName(s *plan.Step) string {
	if s.IsForEach() {
		return s.ItemName()
	}
	return ""
}

// data returns a behaviour whose step succeeds with the given data.
func data(v map[string]any) behaviour {
	return func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		return &wfapi.RunToolResult{Attempt: attempt, Envelope: envelope.Envelope{ToolID: "t", Success: true, Message: "ok",
			Timestamp: "2026-11-21T00:00:00Z", Data: v}}, nil
	}
}

func stepResult(res *wfapi.Result, id string) wfapi.StepResult {
	for _, s := range res.Steps {
		if s.ID == id {
			return s
		}
	}
	return wfapi.StepResult{}
}

func TestForEachLiteralList(t *testing.T) {
	src := "name: fe\nmax_parallel: 8\nsteps:\n  - {id: each, capability: x.a, for_each: [a, b, c, d, e], max_parallel: 2, with: {v: '${item}', i: '${index}'}}\n  - {id: after, capability: x.b, needs: [each]}\n"
	res, f := execute(t, src, nil)
	each := stepResult(res, "each")
	if res.Status != wfapi.StatusPassed || each.Status != wfapi.StepSucceeded || f.peak > 2 {
		t.Fatalf("%s [%s] peak %d", res.Status, states(res), f.peak)
	}
	if f.calls["each[0]"] != 1 || f.calls["each[4]"] != 1 || f.calls["after"] != 1 || f.calls["decide-each"] != 0 {
		t.Fatalf("calls %v", f.calls)
	}
	d := each.Envelope.Data.(map[string]any)
	if d["count"] != float64(5) || d["succeeded"] != float64(5) || d["failed"] != float64(0) || len(d["items"].([]any)) != 5 {
		t.Fatalf("aggregate %v", d)
	}
	if in := f.inputs["each[3]"]; in.Step.Item == nil || in.Step.Item.Index != 3 || in.Step.Item.ItemName != "item" {
		t.Fatalf("item call %+v", in.Step)
	}
	if each.ItemCounts == nil || each.ItemCounts.Succeeded != 5 || len(each.Items) != 5 {
		t.Fatalf("item results %+v", each)
	}
}

func TestForEachFromAStepTolerateAndFailFast(t *testing.T) {
	src := "name: fe\nsteps:\n  - {id: find, capability: x.a}\n  - {id: each, capability: x.b, for_each: '${steps.find.data.files}', as: file, %s with: {p: '${file}'}}\n  - {id: after, capability: x.c, needs: [each]}\n"
	files := data(map[string]any{"files": []any{"a", "b", "c", "d"}})
	res, f := execute(t, fmtS(src, "tolerate: {failures: 1},"), map[string]behaviour{"find": files, "each[1]": fail(caperr.TestFailure)})
	each := stepResult(res, "each")
	d := each.Envelope.Data.(map[string]any)
	if res.Status != wfapi.StatusPassed || each.Status != wfapi.StepSucceeded || d["failed"] != float64(1) || d["items"].([]any)[1] != nil || f.calls["decide-each"] != 1 {
		t.Fatalf("tolerated: %s [%s] %v calls %v", res.Status, states(res), d, f.calls)
	}
	res, _ = execute(t, fmtS(src, ""), map[string]behaviour{"find": files, "each[1]": fail(caperr.TestFailure)})
	each = stepResult(res, "each")
	if res.Status != wfapi.StatusFailed || each.Status != wfapi.StepFailed || each.Envelope.Error.Code != caperr.TestFailure || !strings.Contains(each.Envelope.Message, "tolerate 0") {
		t.Fatalf("not tolerated: %s [%s] %+v", res.Status, states(res), each.Envelope)
	}
	if stepResult(res, "after").Status != wfapi.StepSkipped {
		t.Fatalf("after: %s", states(res))
	}
	// An empty list succeeds with count 0.
	res, _ = execute(t, fmtS(src, ""), map[string]behaviour{"find": data(map[string]any{"files": []any{}})})
	if each = stepResult(res, "each"); res.Status != wfapi.StatusPassed || each.Envelope.Data.(map[string]any)["count"] != float64(0) {
		t.Fatalf("empty: %s [%s]", res.Status, states(res))
	}
}

func TestWhen(t *testing.T) {
	src := "name: w\ninputs: {notify: {type: boolean, default: false}}\nsteps:\n  - {id: count, capability: x.a}\n  - {id: big, capability: x.b, when: 'steps.count.data.n > 3'}\n  - {id: notify, capability: x.c, when: 'inputs.notify'}\n  - {id: last, capability: x.d, needs: [big, notify]}\n"
	res, f := execute(t, src, map[string]behaviour{"count": data(map[string]any{"n": float64(5)})})
	if states(res) != "count=succeeded big=succeeded notify=skipped last=succeeded" || stepResult(res, "notify").Reason != "when: false" || res.Status != wfapi.StatusPassed {
		t.Fatalf("%s [%s]", res.Status, states(res))
	}
	if f.calls["notify"] != 0 || f.calls["big"] != 1 {
		t.Fatalf("calls %v", f.calls)
	}
	// Both conditions false: the join over only skipped steps is satisfied.
	res, _ = execute(t, src, map[string]behaviour{"count": data(map[string]any{"n": float64(1)})})
	if states(res) != "count=succeeded big=skipped notify=skipped last=succeeded" || res.Status != wfapi.StatusPassed {
		t.Fatalf("%s [%s]", res.Status, states(res))
	}
	// A condition over the item filters items.
	src = "name: w\nsteps:\n  - {id: each, capability: x.a, for_each: [a.webm, b.txt, c.webm], when: 'item.endsWith(\".webm\")'}\n"
	res, f = execute(t, src, nil)
	each := stepResult(res, "each")
	if res.Status != wfapi.StatusPassed || f.calls["each[1]"] != 0 || f.calls["each[0]"] != 1 || each.ItemCounts.Skipped != 1 || each.Items[1].Reason != "when: false" {
		t.Fatalf("%s %+v calls %v", res.Status, each, f.calls)
	}
}

// Large for_each steps run their items in batches of child workflows, so
// no history grows with the number of items.
func TestForEachInBatches(t *testing.T) {
	saved := ItemBatch
	ItemBatch = 3
	defer func() { ItemBatch = saved }()
	src := "name: b\nmax_parallel: 4\nsteps:\n  - {id: each, capability: x.a, for_each: [a, b, c, d, e, f, g, h], %s with: {v: '${item}'}}\n  - {id: after, capability: x.b, needs: [each]}\n"
	res, f := execute(t, fmtS(src, "tolerate: {failures: 1},"), map[string]behaviour{"each[4]": fail(caperr.TestFailure)})
	each := stepResult(res, "each")
	d := each.Envelope.Data.(map[string]any)
	if res.Status != wfapi.StatusPassed || d["count"] != float64(8) || d["succeeded"] != float64(7) || d["failed"] != float64(1) || f.calls["after"] != 1 {
		t.Fatalf("tolerated: %s [%s] %v", res.Status, states(res), d)
	}
	for i := 0; i < 8; i++ {
		if n := f.calls[wfapi.ItemLabel("each", i)]; n != 1 {
			t.Fatalf("item %d ran %d times", i, n)
		}
	}
	if v := f.inputs["each[7]"].Step.Item; v == nil || !v.HasValue || v.Value != "h" {
		t.Fatalf("a batch item carries its value: %+v", v)
	}
	// Not tolerated under fail_fast: the step fails, later batches never start.
	res, f = execute(t, fmtS(src, ""), map[string]behaviour{"each[1]": fail(caperr.TestFailure)})
	each = stepResult(res, "each")
	if res.Status != wfapi.StatusFailed || each.Status != wfapi.StepFailed || f.calls["each[6]"] != 0 || each.ItemCounts.Failed != 1 {
		t.Fatalf("fail_fast: %s [%s] %+v calls %v", res.Status, states(res), each.ItemCounts, f.calls)
	}
}

// Found in review: a step's own cancelled items are cancelled, not failed;
// on_failure: skip applies to for_each steps; a when: false is never a
// failure, even for a critical step or a dependent of a failed step.
func TestControlFlowReviewFindings(t *testing.T) {
	src := "name: r\nsteps:\n  - {id: each, capability: x.a, for_each: [a, b, c, d], max_parallel: 4, %s}\n  - {id: plain, capability: x.b}\n"
	res, _ := execute(t, fmtS(src, "with: {}"), map[string]behaviour{"each": block, "each[2]": fail(caperr.TestFailure)})
	each := stepResult(res, "each")
	if each.ItemCounts.Failed != 1 || each.Envelope.Error.Code != caperr.TestFailure {
		t.Fatalf("own cancelled items: %+v %+v", each.ItemCounts, each.Envelope.Error)
	}
	res, _ = execute(t, fmtS(src, "on_failure: skip"), map[string]behaviour{"each[2]": fail(caperr.TestFailure)})
	if each = stepResult(res, "each"); each.Status != wfapi.StepSkipped || res.Status != wfapi.StatusPassed {
		t.Fatalf("on_failure: skip: %s [%s]", res.Status, states(res))
	}
	absorbed := "name: w\ninputs: {go: {type: boolean, default: false}}\nfailure_policy: continue_all\nsteps:\n  - {id: a, capability: x.a}\n  - {id: b, capability: x.b}\n  - {id: d, capability: x.d, needs: [a, b], join: {policy: any}, when: inputs.go}\n"
	res, _ = execute(t, absorbed, map[string]behaviour{"a": fail(caperr.TestFailure)})
	if res.Status != wfapi.StatusPassed || stepResult(res, "d").Reason != "when: false" {
		t.Fatalf("a failure before a when: false any join: %s [%s] %s", res.Status, states(res), res.Message)
	}
	critical := "name: c\ninputs: {go: {type: boolean, default: false}}\nfailure_policy: critical_path\nsteps:\n  - {id: must, capability: x.a, critical: true, when: inputs.go}\n  - {id: other, capability: x.b}\n"
	if res, _ = execute(t, critical, nil); res.Status != wfapi.StatusPassed {
		t.Fatalf("a critical when: false: %s [%s] %s", res.Status, states(res), res.Message)
	}
}

func TestWhenOverASkippedStepSaysHowToGuard(t *testing.T) {
	src := "name: g\ninputs: {go: {type: boolean, default: false}}\nsteps:\n  - {id: a, capability: x.a, when: inputs.go}\n  - {id: b, capability: x.b, when: 'steps.a.data.n > 1'}\n"
	res, _ := execute(t, src, nil)
	b := stepResult(res, "b")
	if b.Status != wfapi.StepFailed || !strings.Contains(b.Envelope.Message, "guard with steps.a.success") {
		t.Fatalf("%s: %+v", b.Status, b.Envelope)
	}
}

// The report's plan is the one the run was given: Resolve does not record
// it a second time, the workflow hands it to Finalize. A plan file's value
// is never recorded.
func TestFinalizeGetsThePlanGiven(t *testing.T) {
	given := map[string]any{"name": "x", "steps": []any{map[string]any{"id": "a", "capability": "x.a"}}}
	for _, c := range []struct {
		name string
		in   wfapi.Input
		want any
	}{
		{"inline", wfapi.Input{Plan: given}, given},
		{"file", wfapi.Input{PlanFile: "plans/x.yaml"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakes{resolved: resolvedFrom(t, "name: x\nsteps:\n  - {id: a, capability: x.a}\n"), calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
			env := newEnv(t, f)
			env.ExecuteWorkflow(wfapi.WorkflowType, c.in)
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow did not complete: %v", env.GetWorkflowError())
			}
			if f.finalized == nil || f.finalized.Resolved == nil {
				t.Fatal("Finalize got no resolution")
			}
			if got := f.finalized.Resolved.PlanValue; !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Finalize got plan %v, want %v", got, c.want)
			}
		})
	}
}
