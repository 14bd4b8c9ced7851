package workflows

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
)

// paths records, per step, whether each of its attempts ran as a local
// activity ("L") or a regular one ("A").
type paths struct {
	mu  sync.Mutex
	got map[string]string
}

func (p *paths) wrap(id string, b behaviour) behaviour {
	return func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		p.mu.Lock()
		if activity.GetInfo(ctx).IsLocalActivity {
			p.got[id] += "L"
		} else {
			p.got[id] += "A"
		}
		p.mu.Unlock()
		return b(ctx, attempt)
	}
}

func localRun(t *testing.T, src string, local []string, behave map[string]behaviour) (*wfapi.Result, *paths, *fakes) {
	t.Helper()
	rr := resolvedFrom(t, src)
	for i := range rr.Steps {
		for _, id := range local {
			if rr.Steps[i].ID == id {
				rr.Steps[i].Local = true
			}
		}
	}
	p := &paths{got: map[string]string{}}
	f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}, behave: map[string]behaviour{}}
	for _, s := range rr.Steps {
		b := behave[s.ID]
		if b == nil {
			b = ok
		}
		f.behave[s.ID] = p.wrap(s.ID, b)
	}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return &res, p, f
}

const localChain = `name: local
steps:
  - {id: a, capability: x.a}
  - {id: b, capability: x.b, needs: [a]}
  - {id: c, capability: x.c, needs: [b]}
`

func TestLocalStepsRunAsLocalActivities(t *testing.T) {
	res, p, _ := localRun(t, localChain, []string{"a", "b"}, nil)
	if res.Status != wfapi.StatusPassed || p.got["a"] != "L" || p.got["b"] != "L" || p.got["c"] != "A" {
		t.Fatalf("%s paths %v", res.Status, p.got)
	}
	want := map[string]string{"a": PathLocal, "b": PathLocal, "c": PathActivity}
	for _, s := range res.Steps {
		if s.Execution != want[s.ID] || s.Attempts != 1 {
			t.Fatalf("step %s: execution %q attempts %d", s.ID, s.Execution, s.Attempts)
		}
	}
}

// A local activity on a worker that is not the run's host runs again as a
// regular activity on the host.
func TestLocalOnTheWrongHostRunsOnTheHost(t *testing.T) {
	wrongThenOK := func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		if activity.GetInfo(ctx).IsLocalActivity {
			return nil, temporal.NewNonRetryableApplicationError("elsewhere", wfapi.ErrWrongHost, nil)
		}
		return ok(ctx, attempt)
	}
	res, p, f := localRun(t, localChain, []string{"a"}, map[string]behaviour{"a": wrongThenOK})
	if res.Status != wfapi.StatusPassed || p.got["a"] != "LA" || res.Steps[0].Execution != PathLocalThenActivity || res.Steps[0].Attempts != 1 {
		t.Fatalf("%s paths %v step %+v", res.Status, p.got, res.Steps[0])
	}
	if in := f.inputs["a"]; in.Host != "" {
		t.Fatalf("the regular attempt still names a host: %q", in.Host)
	}
}

// Local attempts that fail go on as regular attempts, up to the step's
// max_attempts in all; a failure the tool marks final stops at once.
func TestLocalRetriesThenRegularRetries(t *testing.T) {
	src := `name: local
failure_policy: continue_all
steps:
  - {id: a, capability: x.a, retry: {max_attempts: 4}}
  - {id: b, capability: x.b, retry: {max_attempts: 4}}
  - {id: c, capability: x.c, retry: {max_attempts: 4}}
`
	res, p, _ := localRun(t, src, []string{"a", "b", "c"}, map[string]behaviour{
		"a": failTimes(2, caperr.ToolFailure),  // 2 local failures, then a regular success
		"b": failTimes(10, caperr.ToolFailure), // every attempt fails
		"c": fail(caperr.InvalidInput),         // final at once
	})
	byID := map[string]wfapi.StepResult{}
	for _, s := range res.Steps {
		byID[s.ID] = s
	}
	if p.got["a"] != "LLA" || byID["a"].Status != wfapi.StepSucceeded || byID["a"].Execution != PathLocalThenActivity || byID["a"].Attempts != 3 {
		t.Fatalf("a: paths %q %+v", p.got["a"], byID["a"])
	}
	if p.got["b"] != "LLAA" || byID["b"].Status != wfapi.StepFailed {
		t.Fatalf("b: paths %q %s", p.got["b"], byID["b"].Status)
	}
	if p.got["c"] != "L" || byID["c"].Status != wfapi.StepFailed || byID["c"].Execution != PathLocal {
		t.Fatalf("c: paths %q %+v", p.got["c"], byID["c"])
	}
}

// Resolve and Finalize run as local activities.
func TestBookkeepingRunsLocally(t *testing.T) {
	rr := resolvedFrom(t, localChain)
	var local []string
	var mu sync.Mutex
	f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.RegisterActivityWithOptions(func(ctx context.Context, in wfapi.ResolveInput) (*wfapi.ResolveResult, error) {
		mu.Lock()
		if activity.GetInfo(ctx).IsLocalActivity {
			local = append(local, "resolve")
		}
		mu.Unlock()
		return rr, nil
	}, activity.RegisterOptions{Name: wfapi.ResolveActivity})
	env.RegisterActivityWithOptions(func(ctx context.Context, in wfapi.FinalizeInput) (*wfapi.ReportPaths, error) {
		mu.Lock()
		if activity.GetInfo(ctx).IsLocalActivity {
			local = append(local, "finalize")
		}
		mu.Unlock()
		return &wfapi.ReportPaths{JSON: "/r.json"}, nil
	}, activity.RegisterOptions{Name: wfapi.FinalizeActivity})
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != wfapi.StatusPassed || len(local) != 2 || res.Report.JSON != "/r.json" {
		t.Fatalf("%s local %v report %v", res.Status, local, res.Report)
	}
}

// Local steps that end in one workflow task are flushed every LocalFlush:
// a 1 ms timer ends the task, so its completion stays bounded.
func TestLocalStepsFlushEveryHundred(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: chain\nsteps:\n  - {id: s0, capability: x.s}\n")
	for i := 1; i < 250; i++ {
		fmt.Fprintf(&b, "  - {id: s%d, capability: x.s, needs: [s%d]}\n", i, i-1)
	}
	rr := resolvedFrom(t, b.String())
	for i := range rr.Steps {
		rr.Steps[i].Local = true
	}
	f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.SetCurrentHistoryLength(10)
	timers := 0
	env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != wfapi.StatusPassed || timers != 2 {
		t.Fatalf("%s, %d flush timers for 250 local steps (want 2)", res.Status, timers)
	}
}

// Inline steps are flushed by the bytes their markers hold, not every
// LocalFlush: a fan-out of small results ends in one workflow task, one of
// large results yields each time the run's InlineFlushBytes is reached.
func TestInlineStepsFlushByBytes(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: fan\nmax_parallel: 1000\nsteps:\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "  - {id: s%03d, capability: x.s}\n", i)
	}
	for _, tc := range []struct {
		name       string
		text       int  // bytes of each step's data
		budget     int  // the run's InlineFlushBytes (0: the default)
		decline    bool // every third step is declined: a local activity
		wantTimers int  // at least, and at most one more: batches run concurrently, the order they end in varies
	}{
		{"small results, default budget", 10, 0, false, 0},
		// 1.3 KB a result: a batch stops at MaxInlineBatchBytes (~197
		// results), the rest go to the next; a batch's 256 KB passes the
		// budget: a yield, then the last batches end the run.
		{"1 KB results, 100 KB budget", 1000, 100 << 10, false, 1},
		{"declined steps: 100 local activities, LocalFlush", 10, 0, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := resolvedFrom(t, b.String())
			rr.InlineFlushBytes = tc.budget
			for i := range rr.Steps {
				rr.Steps[i].Local, rr.Steps[i].Inline = true, true
			}
			f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
			var evaluated atomic.Int64
			eng := func(calls []wfapi.RunToolInput) wfapi.InlineBatch {
				var b wfapi.InlineBatch
				size := 0
				for _, in := range calls {
					if size >= wfapi.MaxInlineBatchBytes {
						break
					}
					if n, _ := strconv.Atoi(in.Step.ID[1:]); tc.decline && n%3 == 2 {
						b.Outcomes = append(b.Outcomes, wfapi.InlineOutcome{})
						continue
					}
					evaluated.Add(1)
					env := envelope.NewBuilder(in.Step.Tool).Succeed("ok", map[string]any{"text": strings.Repeat("x", tc.text)})
					b.Outcomes = append(b.Outcomes, wfapi.InlineOutcome{OK: true, Result: &wfapi.RunToolResult{Envelope: env, Attempt: 1}, Size: tc.text + 300})
					size += tc.text + 300
				}
				return b
			}
			env := engineEnv(eng, f)
			timers := 0
			env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
			env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
			var res wfapi.Result
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			declined := 0
			for _, st := range res.Steps {
				want := PathInline
				if f.callsOf(st.ID) > 0 {
					want = PathLocal
					declined++
				}
				if st.Execution != want || st.Status != wfapi.StepSucceeded {
					t.Fatalf("step %s %s, ran %q (want %q)", st.ID, st.Status, st.Execution, want)
				}
			}
			wantDeclined := 0
			if tc.decline {
				wantDeclined = 100
			}
			if res.Status != wfapi.StatusPassed || int(evaluated.Load())+declined != 300 || declined != wantDeclined || (timers < tc.wantTimers || timers > tc.wantTimers+1 || (tc.wantTimers == 0 && timers != 0)) {
				t.Fatalf("%s: %d evaluated inline, %d declined, %d flush timers (want %d, or one more)", res.Status, evaluated.Load(), declined, timers, tc.wantTimers)
			}
		})
	}
}

// A run cancelled while its inline steps' batch runs ends: the batch's
// steps end cancelled, nothing runs them again and nothing waits for them.
func TestInlineQueueCancelled(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: fan\nmax_parallel: 1000\nsteps:\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "  - {id: s%03d, capability: x.s}\n", i)
	}
	rr := resolvedFrom(t, b.String())
	for i := range rr.Steps {
		rr.Steps[i].Local, rr.Steps[i].Inline = true, true
	}
	f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	var evaluated atomic.Int64
	// Every batch evaluates its first step, slowly: the rest run as local
	// activities, and the run is cancelled meanwhile.
	eng := func(calls []wfapi.RunToolInput) wfapi.InlineBatch {
		evaluated.Add(1)
		time.Sleep(20 * time.Millisecond)
		env := envelope.NewBuilder(calls[0].Step.Tool).Succeed("ok", map[string]any{})
		return wfapi.InlineBatch{Outcomes: []wfapi.InlineOutcome{{OK: true, Result: &wfapi.RunToolResult{Envelope: env, Attempt: 1}, Size: 300}}}
	}
	env := engineEnv(eng, f)
	env.SetTestTimeout(10 * time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, 10*time.Millisecond)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	counts := map[wfapi.StepState]int{}
	for _, st := range res.Steps {
		counts[st.Status]++
		if st.Status == wfapi.StepCancelled && st.Execution != PathInline {
			t.Errorf("step %s cancelled while queued reports %q", st.ID, st.Execution)
		}
	}
	f.mu.Lock()
	local := len(f.calls)
	f.mu.Unlock()
	if res.Status != wfapi.StatusCancelled || evaluated.Load() != 1 || counts[wfapi.StepCancelled] != 50 || local != 0 {
		t.Fatalf("%s: %d batches, steps %v, %d local activities", res.Status, evaluated.Load(), counts, local)
	}
}

// engineEnv is a test environment running the workflows over the fakes,
// eval the batches of inline steps.
func engineEnv(eval func([]wfapi.RunToolInput) wfapi.InlineBatch, f *fakes) *testsuite.TestWorkflowEnvironment {
	return aheadEnv(func(calls []wfapi.RunToolInput, _ []wfapi.InlineFollow) wfapi.InlineBatch { return eval(calls) }, f)
}

// aheadEnv is engineEnv whose eval also gets the steps a batch may
// evaluate after its own.
func aheadEnv(eval func([]wfapi.RunToolInput, []wfapi.InlineFollow) wfapi.InlineBatch, f *fakes) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(PlanWorkflow, workflow.RegisterOptions{Name: wfapi.WorkflowType})
	env.RegisterActivityWithOptions(func(_ context.Context, calls []wfapi.RunToolInput, follow []wfapi.InlineFollow) (wfapi.InlineBatch, error) {
		return eval(calls, follow), nil
	},
		activity.RegisterOptions{Name: wfapi.RunInlineActivity})
	env.RegisterActivityWithOptions(f.Resolve, activity.RegisterOptions{Name: wfapi.ResolveActivity})
	env.RegisterActivityWithOptions(f.RunTool, activity.RegisterOptions{Name: wfapi.RunToolActivity})
	env.RegisterActivityWithOptions(f.Finalize, activity.RegisterOptions{Name: wfapi.FinalizeActivity})
	return env
}
