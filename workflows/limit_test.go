package workflows

import (
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// grants runs a LimitWorkflow and asks it for slots at the given times:
// when each holder got its slot (since the start), or its error.
type limitCall struct {
	at     time.Duration
	holder string
	signal string // "": acquire; else this signal with holder
}

func runLimit(t *testing.T, req wfapi.LimitRequest, calls []limitCall) map[string]string {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(LimitWorkflow, workflow.RegisterOptions{Name: wfapi.LimitWorkflowType})
	got := map[string]string{}
	var start time.Time
	env.RegisterDelayedCallback(func() { start = env.Now() }, 0)
	for _, c := range calls {
		env.RegisterDelayedCallback(func() {
			if c.signal != "" {
				env.SignalWorkflow(c.signal, c.holder)
				return
			}
			r := req
			r.Holder = c.holder
			env.UpdateWorkflow(wfapi.LimitAcquireUpdate, c.holder, &testsuite.TestUpdateCallback{
				OnReject: func(err error) { got[c.holder] = "rejected: " + err.Error() },
				OnAccept: func() {},
				OnComplete: func(_ any, err error) {
					if err != nil {
						got[c.holder] = "error"
						return
					}
					got[c.holder] = fmt.Sprint(env.Now().Sub(start).Round(100 * time.Millisecond))
				},
			}, r)
		}, c.at)
	}
	env.ExecuteWorkflow(wfapi.LimitWorkflowType, wfapi.LimitState{Label: "t"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestLimitWorkflow(t *testing.T) {
	cases := []struct {
		name  string
		req   wfapi.LimitRequest
		calls []limitCall
		want  map[string]string
	}{
		{"concurrency: the third waits for a release", wfapi.LimitRequest{Concurrency: 2, Lease: time.Minute},
			[]limitCall{{time.Second, "a", ""}, {time.Second, "b", ""}, {2 * time.Second, "c", ""}, {5 * time.Second, "a", wfapi.LimitReleaseSignal}},
			map[string]string{"a": "1s", "b": "1s", "c": "5s"}},
		{"rate: one start a second", wfapi.LimitRequest{Interval: time.Second, Lease: time.Minute},
			[]limitCall{{time.Second, "a", ""}, {time.Second, "b", ""}, {time.Second, "c", ""}},
			map[string]string{"a": "1s", "b": "2s", "c": "3s"}},
		{"a dead worker's slot comes back with its lease", wfapi.LimitRequest{Concurrency: 1, Lease: 30 * time.Second},
			[]limitCall{{time.Second, "a", ""}, {2 * time.Second, "b", ""}},
			map[string]string{"a": "1s", "b": "31s"}},
		{"a waiter released takes nothing", wfapi.LimitRequest{Concurrency: 1, Lease: time.Minute},
			[]limitCall{{time.Second, "a", ""}, {2 * time.Second, "b", ""}, {3 * time.Second, "c", ""}, {4 * time.Second, "b", wfapi.LimitReleaseSignal},
				{5 * time.Second, "a", wfapi.LimitReleaseSignal}},
			map[string]string{"a": "1s", "b": "error", "c": "5s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := runLimit(t, c.req, c.calls)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
