package workflows

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// A new run starts its max_run_seconds timer and upserts its running
// status only once it may wait outside its workflow task (baseline 2):
// a run of local steps records its final status alone.
func TestRunGoesOutsideOnlyToWait(t *testing.T) {
	const plan = `name: outside
steps:
  - {id: a, capability: x.a, retry: {max_attempts: 4}}
  - {id: b, capability: x.b, needs: [a]}
`
	for _, c := range []struct {
		name     string
		local    []string
		behave   map[string]behaviour
		tweak    func(*wfapi.ResolveResult)
		timer    bool
		statuses []string
	}{
		{"every step local", []string{"a", "b"}, nil, nil, false, []string{"passed"}},
		{"a failing local step", []string{"a", "b"}, map[string]behaviour{"a": fail(caperr.InvalidInput)}, nil, false, []string{"failed"}},
		{"a regular step", []string{"a"}, nil, nil, true, []string{"running", "passed"}},
		// Its local attempts fail; it goes on as a regular activity from
		// its own coroutine while the loop waits.
		{"a local step going on as an activity", []string{"a", "b"}, map[string]behaviour{"a": failTimes(LocalAttempts, caperr.ToolFailure)}, nil, true, []string{"running", "passed"}},
		// The SDK waits for a local retry past a workflow task on a
		// server timer.
		{"a local step whose retries wait past a task", []string{"a", "b"}, map[string]behaviour{"a": failTimes(1, caperr.ToolFailure)},
			func(rr *wfapi.ResolveResult) { rr.Steps[0].InitialInterval = 30 * time.Second }, true, []string{"running", "passed"}},
		// The task yields after its last step: nothing is left to wait for.
		{"a yield after the last step", []string{"a", "b"}, nil, func(rr *wfapi.ResolveResult) { rr.LocalFlush = 2 }, false, []string{"passed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rr := resolvedFrom(t, plan)
			rr.MaxRunSeconds, rr.SearchAttributes = 3600, true
			for i := range rr.Steps {
				rr.Steps[i].Local = slices.Contains(c.local, rr.Steps[i].ID)
			}
			if c.tweak != nil {
				c.tweak(rr)
			}
			f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}, behave: map[string]behaviour{"a": ok, "b": ok}}
			for id, b := range c.behave {
				f.behave[id] = b
			}
			env := newEnv(t, f)
			timer := false
			env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timer = timer || d > time.Minute })
			statuses := recordStatuses(env)
			env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "outside"}})
			var res wfapi.Result
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if timer != c.timer || strings.Join(*statuses, " ") != strings.Join(c.statuses, " ") || string(res.Status) != c.statuses[len(c.statuses)-1] {
				t.Fatalf("%s: deadline timer %v (want %v), status upserts %q (want %q)", res.Status, timer, c.timer, *statuses, c.statuses)
			}
		})
	}
}

// A run that carries a status from its start (package client's start with
// running) upserts the one it ends with, also when it ends before its
// steps run: refused, or with nothing to resolve.
func TestRunEndsWithTheStatusItCarries(t *testing.T) {
	for _, c := range []struct {
		name, input string
		want        []string
	}{
		{"refused", `{"plan": {"name": "x"}, "run_dir": "/"}`, []string{"failed"}},
		{"nothing to resolve", `{}`, []string{"invalid"}},
		{"steps that ran", `{"plan": {"name": "x"}}`, []string{"passed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rr := resolvedFrom(t, "name: x\nsteps:\n  - {id: a, capability: x.a}\n")
			rr.SearchAttributes, rr.Steps[0].Local = true, true
			f := &fakes{resolved: rr, behave: map[string]behaviour{"a": ok}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
			env := newEnv(t, f)
			if err := env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(statusKey.ValueSet("running"))); err != nil {
				t.Fatal(err)
			}
			statuses := recordStatuses(env)
			env.ExecuteWorkflow(wfapi.WorkflowType, json.RawMessage(c.input))
			var res wfapi.Result
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if strings.Join(*statuses, " ") != strings.Join(c.want, " ") || string(res.Status) != c.want[len(c.want)-1] {
				t.Fatalf("%s: status upserts %q, want %q", res.Status, *statuses, c.want)
			}
		})
	}
}

// recordStatuses has env record the status of each search-attribute upsert.
func recordStatuses(env *testsuite.TestWorkflowEnvironment) *[]string {
	statuses := &[]string{}
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		v, _ := args.Get(0).(temporal.SearchAttributes).GetKeyword(statusKey)
		*statuses = append(*statuses, v)
	}).Return(nil)
	return statuses
}
