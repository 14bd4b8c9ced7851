package workflows

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/verdict"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

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
				got := d.Envelope != nil && d.Envelope.Error != nil && caperr.Code(d.Envelope.Error.Code) == caperr.QuorumNotMet
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
	if slow := res.Steps[1]; slow.Attempts != 1 || strings.HasPrefix(slow.Envelope.Timestamp, "1970") || caperr.Code(slow.Envelope.Error.Code) != caperr.Cancelled {
		t.Fatalf("cancelled step: attempts %d, envelope %+v", slow.Attempts, slow.Envelope)
	}
	if f.callsOf("other") != 0 || f.callsOf("later") != 0 {
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
	if res.Status != "passed" || states(res) != "flaky=skipped after=succeeded" || f.callsOf("flaky") != 1 {
		t.Fatalf("%s [%s] calls=%d", res.Status, states(res), f.callsOf("flaky"))
	}
}

func TestRetries(t *testing.T) {
	src := "name: r\nsteps:\n  - {id: s, capability: x.a, retry: {max_attempts: 3}}\n"
	res, f := execute(t, src, map[string]behaviour{"s": failTimes(2, caperr.ToolFailure)})
	if res.Status != "passed" || f.callsOf("s") != 3 || res.Steps[0].Attempts != 3 {
		t.Fatalf("retryable: %s calls=%d attempts=%d", res.Status, f.callsOf("s"), res.Steps[0].Attempts)
	}
	res, f = execute(t, src, map[string]behaviour{"s": fail(caperr.SchemaViolation)})
	if res.Status != "failed" || f.callsOf("s") != 1 || caperr.Code(res.Steps[0].Envelope.Error.Code) != caperr.SchemaViolation {
		t.Fatalf("non-retryable code must not be retried: calls=%d %+v", f.callsOf("s"), res.Steps[0])
	}
	res, f = execute(t, src, map[string]behaviour{"s": fail(caperr.ToolFailure)})
	last := res.Steps[0].Envelope.Feedback[len(res.Steps[0].Envelope.Feedback)-1]
	if f.callsOf("s") != 3 || last.Detail != string(caperr.RetryExhausted) {
		t.Fatalf("exhausted: calls=%d last feedback %+v", f.callsOf("s"), last)
	}
	if e := res.Steps[0].Envelope.Error; caperr.Code(e.Code) != caperr.RetryExhausted || caperr.Code(e.Cause) != caperr.ToolFailure || res.Steps[0].Attempts != 3 {
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
	if res.Status != "failed" || caperr.Code(res.Steps[0].Envelope.Error.Code) != caperr.TaskTimeout {
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
	rr.Status, rr.Message = verdict.PartialComplete, "1 of 2 steps are not covered"
	rr.Gaps = []wire.Gap{{StepID: "dl", MissingCapability: "youtube.download", Reason: gap.NoCapabilityMatch}}
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
	if res.Status != wfapi.StatusPassed || f.callsOf("a") != 2 || f.callsOf("b") != 2 {
		t.Fatalf("idempotent producer: %s [%s] calls a=%d b=%d", res.Status, states(&res), f.callsOf("a"), f.callsOf("b"))
	}
	if got := f.inputs["b"].Deps["a"]; got.DataSHA256 != "abc123" || got.DataFile != "/runs/x/a.json" {
		t.Fatalf("the consumer must get the recorded digest: %+v", got)
	}
	// Said where people look: the run's warnings (its result and report).
	if want := "b: the stored output of step a, /runs/x/a.json, is missing; a ran again and b waited for it"; !slices.Contains(res.Warnings, want) {
		t.Fatalf("warnings %q, want %q", res.Warnings, want)
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
	if res.Status != wfapi.StatusFailed || f.callsOf("a") != 1 || caperr.Code(b.Envelope.Error.Code) != caperr.ObservabilityError || !strings.Contains(b.Envelope.Message, "/runs/x/a.json") {
		t.Fatalf("non-idempotent producer: %s calls a=%d, b=%+v", res.Status, f.callsOf("a"), b.Envelope)
	}
	if want := "b: the stored output of step a, /runs/x/a.json, is missing; b failed (a producer is not idempotent, or was re-run 2 times already)"; !slices.Contains(res.Warnings, want) {
		t.Fatalf("warnings %q, want %q", res.Warnings, want)
	}
}

// A signal sent to a run is read by nothing: the progress answer says so
// (Temporal accepts any signal silently).
func TestUnreadSignalsAreWarned(t *testing.T) {
	src := "name: s\nsteps:\n  - {id: slow, capability: x.b}\n"
	f := &fakes{resolved: resolvedFrom(t, src), behave: map[string]behaviour{"slow": block}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	var progress wfapi.Result
	env.RegisterDelayedCallback(func() { env.SignalWorkflow("approve", map[string]string{"step": "slow"}) }, time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(wfapi.ProgressQuery)
		if err == nil {
			_ = v.Get(&progress)
		}
		env.CancelWorkflow()
	}, 2*time.Second)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "s"}})
	if len(progress.Warnings) != 1 || !strings.Contains(progress.Warnings[0], `a signal "approve" was sent to this run, which reads no signals`) {
		t.Fatalf("warnings: %q", progress.Warnings)
	}
}
