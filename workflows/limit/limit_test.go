package limit

import (
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// limitCall is an attempt's call to a LimitWorkflow at a time.
type limitCall struct {
	at     time.Duration
	holder string
	signal string // "": acquire; else this signal
	held   bool   // a renewal's: its tool runs
}

// runLimit runs a LimitWorkflow with the calls and says when each holder
// first held its slot (to the half second), "-" for never.
func runLimit(t *testing.T, req wfapi.LimitRequest, calls []limitCall, horizon time.Duration) map[string]string {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: wfapi.LimitWorkflowType})
	got := map[string]string{}
	for _, c := range calls {
		got[c.holder] = "-"
		env.RegisterDelayedCallback(func() {
			r := req
			r.Holder = c.holder
			switch c.signal {
			case wfapi.LimitReleaseSignal:
				env.SignalWorkflow(c.signal, c.holder)
			case wfapi.LimitRenewSignal:
				env.SignalWorkflow(c.signal, wfapi.LimitRenew{Holder: c.holder, Lease: r.Lease, Held: c.held})
			default:
				env.UpdateWorkflow(wfapi.LimitAcquireUpdate, c.holder+c.at.String(), &testsuite.TestUpdateCallback{
					OnReject: func(err error) { t.Errorf("%s: rejected: %v", c.holder, err) }, OnAccept: func() {},
					OnComplete: func(_ any, err error) {
						if err != nil {
							t.Errorf("%s: %v", c.holder, err)
						}
					}}, r)
			}
		}, c.at)
	}
	// A quarter second after each half: the check sees what the calls of
	// the half did.
	for at := 750 * time.Millisecond; at <= horizon; at += 500 * time.Millisecond {
		env.RegisterDelayedCallback(func() {
			for h := range got {
				if got[h] != "-" {
					continue
				}
				v, err := env.QueryWorkflow(wfapi.LimitHoldsQuery, h)
				var state string
				if err == nil && v.Get(&state) == nil && state == wfapi.LimitHeld {
					got[h] = (at - 250*time.Millisecond).String()
				}
			}
		}, at)
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
			[]limitCall{{1 * time.Second, "a", "", false}, {time.Second, "b", "", false}, {2 * time.Second, "c", "", false}, {5 * time.Second, "a", wfapi.LimitReleaseSignal, false}},
			map[string]string{"a": "1s", "b": "1s", "c": "5s"}},
		{"rate: one start a second", wfapi.LimitRequest{Interval: time.Second, Lease: time.Minute},
			[]limitCall{{time.Second, "a", "", false}, {time.Second, "b", "", false}, {time.Second, "c", "", false}},
			map[string]string{"a": "1s", "b": "2s", "c": "3s"}},
		{"a dead worker's slot comes back with its lease", wfapi.LimitRequest{Concurrency: 1, Lease: 30 * time.Second},
			[]limitCall{{time.Second, "a", "", false}, {2 * time.Second, "b", "", false}, {12 * time.Second, "b", wfapi.LimitRenewSignal, false}, {22 * time.Second, "b", wfapi.LimitRenewSignal, false}},
			map[string]string{"a": "1s", "b": "31s"}},
		{"a waiter released takes nothing", wfapi.LimitRequest{Concurrency: 1, Lease: time.Minute},
			[]limitCall{{time.Second, "a", "", false}, {2 * time.Second, "b", "", false}, {3 * time.Second, "c", "", false}, {4 * time.Second, "b", wfapi.LimitReleaseSignal, false},
				{5 * time.Second, "a", wfapi.LimitReleaseSignal, false}},
			map[string]string{"a": "1s", "b": "-", "c": "5s"}},
		{"a waiter whose worker died loses its place", wfapi.LimitRequest{Concurrency: 1, Lease: 10 * time.Second},
			[]limitCall{{time.Second, "a", "", false}, {2 * time.Second, "b", "", false}, {3 * time.Second, "c", "", false},
				{5 * time.Second, "a", wfapi.LimitRenewSignal, true}, {9 * time.Second, "a", wfapi.LimitRenewSignal, true}, {9 * time.Second, "c", wfapi.LimitRenewSignal, false},
				{14 * time.Second, "a", wfapi.LimitReleaseSignal, false}},
			map[string]string{"a": "1s", "b": "-", "c": "14s"}},
		// A tool that ran on through a server outage longer than its lease
		// holds again on its next renewal (over the concurrency): the next
		// one waits for it.
		{"a holder let go holds again on its renewal", wfapi.LimitRequest{Concurrency: 1, Lease: 10 * time.Second},
			[]limitCall{{time.Second, "a", "", false}, {15 * time.Second, "a", wfapi.LimitRenewSignal, true}, {16 * time.Second, "b", "", false},
				{20 * time.Second, "b", wfapi.LimitRenewSignal, false}, {24 * time.Second, "a", wfapi.LimitReleaseSignal, false}},
			map[string]string{"a": "1s", "b": "24s"}},
		// Hostile findings at 6003afe, 11: a client's renewal of a holder
		// the limit never granted makes no holder.
		{"a ghost's renewal holds nothing", wfapi.LimitRequest{Concurrency: 1, Lease: 10 * time.Second},
			[]limitCall{{time.Second, "a", "", false}, {2 * time.Second, "ghost", wfapi.LimitRenewSignal, true}, {3 * time.Second, "b", "", false},
				{5 * time.Second, "a", wfapi.LimitReleaseSignal, false}},
			map[string]string{"a": "1s", "ghost": "-", "b": "5s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := runLimit(t, c.req, c.calls, 40*time.Second)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestLimitRefusesWhatNoAttemptSends: an acquire no attempt of capflow's
// sends (a concurrency below one, a lease of ten years) is refused before
// it is recorded, and the limit keeps its holders (hostile findings at
// 6003afe, 11b, 11c).
func TestLimitOnlyTightens(t *testing.T) {
	// A client's request with no concurrency (a rate only) does not lift
	// the concurrency of 1 the limit keeps (found attacking issue 53).
	got := runLimit(t, wfapi.LimitRequest{Concurrency: 1, Lease: time.Minute},
		[]limitCall{{time.Second, "a", "", false}, {2 * time.Second, "b", "", false}, {5 * time.Second, "a", wfapi.LimitReleaseSignal, false}}, 10*time.Second)
	if fmt.Sprint(got) != "map[a:1s b:5s]" {
		t.Fatalf("%v", got)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: wfapi.LimitWorkflowType})
	var second string
	acquire := func(at time.Duration, req wfapi.LimitRequest, into *string) {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(wfapi.LimitAcquireUpdate, req.Holder, &testsuite.TestUpdateCallback{OnReject: func(err error) { t.Error(err) }, OnAccept: func() {},
				OnComplete: func(v any, err error) {
					if into != nil {
						*into = fmt.Sprint(v)
					}
				}}, req)
		}, at)
	}
	acquire(time.Second, wfapi.LimitRequest{Holder: "a", Concurrency: 1, Lease: time.Minute}, nil)
	acquire(2*time.Second, wfapi.LimitRequest{Holder: "lifter", Interval: time.Millisecond, Lease: time.Minute}, &second)
	env.ExecuteWorkflow(wfapi.LimitWorkflowType, wfapi.LimitState{Label: "t"})
	if second != wfapi.LimitQueued {
		t.Fatalf("a request with no concurrency was %q beside a holder of a concurrency-1 limit", second)
	}
}

func TestLimitRefusesWhatNoAttemptSends(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: wfapi.LimitWorkflowType})
	rejected := 0
	for i, req := range []wfapi.LimitRequest{{Holder: "x", Concurrency: -1}, {Holder: "ghost", Concurrency: 1, Lease: 360000000000000000}, {Holder: "y"}} {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(wfapi.LimitAcquireUpdate, fmt.Sprint("u", i), &testsuite.TestUpdateCallback{
				OnReject:   func(error) { rejected++ },
				OnAccept:   func() { t.Errorf("%+v accepted", req) },
				OnComplete: func(any, error) {}}, req)
		}, time.Second)
	}
	env.ExecuteWorkflow(wfapi.LimitWorkflowType, wfapi.LimitState{Label: "t"})
	if rejected != 3 {
		t.Fatalf("%d of 3 rejected", rejected)
	}
}
