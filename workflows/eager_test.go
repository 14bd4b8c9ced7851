package workflows

import (
	"context"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// eagerRun runs src on host hostA with eager steps (0: none).
func eagerRun(t *testing.T, src string, eager int, behave map[string]behaviour) (*wfapi.Result, *fakes) {
	t.Helper()
	rr := resolvedFrom(t, src)
	rr.HostQueue, rr.EagerSteps = hostA, eager
	f := &fakes{resolved: rr, behave: behave, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return &res, f
}

// onHostOnly refuses an attempt that is not on the host's queue, as a
// worker of another host does.
func onHostOnly(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
	if activity.GetInfo(ctx).TaskQueue != hostA {
		return nil, temporal.NewNonRetryableApplicationError("elsewhere", wfapi.ErrWrongHost, nil)
	}
	return ok(ctx, attempt)
}

// A run that asked for eager steps makes each step's first attempt on
// the workflow's own queue, naming its host, allowed one attempt but
// told the step's in all.
func TestEagerStepsStartOnTheWorkflowsQueue(t *testing.T) {
	res, f := eagerRun(t, localChain, wfapi.EagerPerTask, nil)
	if res.Status != wfapi.StatusPassed {
		t.Fatalf("%s: %s", res.Status, res.Message)
	}
	for _, s := range res.Steps {
		calls := f.seen[s.ID]
		if len(calls) != 1 || calls[0].queue == hostA || calls[0].in.Host != hostA || calls[0].in.MaxAttempts != 3 || calls[0].id != "step-"+s.ID {
			t.Fatalf("step %s: %+v", s.ID, calls)
		}
		if s.Execution != PathActivity || s.Attempts != 1 {
			t.Fatalf("step %s: execution %q attempts %d", s.ID, s.Execution, s.Attempts)
		}
	}
}

// Without the setting every step goes to the host's queue; so does a step
// with one attempt (a stopped host's open poll could take it from the
// shared queue, with nothing left to run on the host).
func TestStepsGoToTheHostWithoutEager(t *testing.T) {
	one := "name: one\nsteps:\n  - {id: a, capability: x.a, retry: {max_attempts: 1}}\n"
	for _, c := range []struct {
		src   string
		eager int
	}{{localChain, 0}, {one, wfapi.EagerPerTask}} {
		_, f := eagerRun(t, c.src, c.eager, nil)
		for id, calls := range f.seen {
			if len(calls) != 1 || calls[0].queue != hostA || calls[0].in.Host != "" {
				t.Fatalf("step %s: %+v", id, calls)
			}
		}
	}
}

// An eager attempt that another host's worker took is refused there, and
// the step runs on the host's queue with all its attempts.
func TestEagerOnAnotherHostRunsOnTheHost(t *testing.T) {
	res, f := eagerRun(t, localChain, wfapi.EagerPerTask, map[string]behaviour{"a": onHostOnly})
	calls := f.seen["a"]
	if res.Status != wfapi.StatusPassed || len(calls) != 2 || res.Steps[0].Attempts != 1 || res.Steps[0].Execution != PathActivity {
		t.Fatalf("%s: %+v %+v", res.Status, res.Steps[0], calls)
	}
	then := calls[1]
	if then.queue != hostA || then.id != "step-a"+wire.OnHostSuffix || then.in.Host != "" || then.in.AttemptsBefore != 0 || then.in.MaxAttempts != 0 {
		t.Fatalf("the host's attempt: %+v", then)
	}
}

// An eager attempt that failed goes on on the host's queue with the
// attempts left, numbered after it; a failure marked final stops there.
func TestEagerFailureRetriesOnTheHost(t *testing.T) {
	src := `name: eager
failure_policy: continue_all
steps:
  - {id: a, capability: x.a, retry: {max_attempts: 3}}
  - {id: b, capability: x.b, retry: {max_attempts: 3}}
`
	res, f := eagerRun(t, src, wfapi.EagerPerTask, map[string]behaviour{"a": failTimes(1, caperr.ToolFailure), "b": fail(caperr.InvalidInput)})
	byID := map[string]wfapi.StepResult{}
	for _, s := range res.Steps {
		byID[s.ID] = s
	}
	a := f.seen["a"]
	if byID["a"].Status != wfapi.StepSucceeded || byID["a"].Attempts != 2 || len(a) != 2 || a[1].queue != hostA || a[1].in.AttemptsBefore != 1 {
		t.Fatalf("a: %+v %+v", byID["a"], a)
	}
	if b := f.seen["b"]; byID["b"].Status != wfapi.StepFailed || len(b) != 1 {
		t.Fatalf("b: %+v %+v", byID["b"], b)
	}
}

// A workflow task that starts no more steps than EagerSteps sends them
// all to its own queue; one that starts more (a fan-out) sends none, nor
// does a for_each step send its items.
func TestEagerStepsPerWorkflowTask(t *testing.T) {
	fan := "name: fan\nsteps:\n  - {id: a, capability: x.a}\n  - {id: b, capability: x.b}\n  - {id: c, capability: x.c}\n"
	for _, c := range []struct {
		name, src string
		eager     int
	}{
		{"three at once", fan, 3},
		{"five at once", fan + "  - {id: d, capability: x.d}\n  - {id: e, capability: x.e}\n", 0},
		{"items", "name: items\nsteps:\n  - {id: a, capability: x.a, for_each: [1, 2]}\n", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, f := eagerRun(t, c.src, wfapi.EagerPerTask, nil)
			eager := 0
			for _, calls := range f.seen {
				if calls[0].queue != hostA {
					eager++
				}
			}
			if res.Status != wfapi.StatusPassed || eager != c.eager || len(f.seen) == 0 {
				t.Fatalf("%s: %d of %d eager, want %d", res.Status, eager, len(f.seen), c.eager)
			}
		})
	}
}
