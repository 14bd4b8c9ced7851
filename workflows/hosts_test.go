package workflows

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/wfapi"
)

const (
	hostA = "capflow@host-a"
	hostB = "capflow@host-b"
)

// lostHostRun runs a plan resolved on host A where the steps in lostOn
// find no worker there (a schedule-to-start timeout, after delay when one
// is given); the Host activity answers with host B. It returns the result
// and the activities in the order they ran, as step@queue.
func lostHostRun(t *testing.T, src string, lostOn map[string]time.Duration, notIdempotent ...string) (*wfapi.Result, []string) {
	t.Helper()
	return lostHostRunStore(t, false, src, lostOn, notIdempotent...)
}

// lostHostRunStore is lostHostRun where host B says whether its artifact
// store is shared.
func lostHostRunStore(t *testing.T, shared bool, src string, lostOn map[string]time.Duration, notIdempotent ...string) (*wfapi.Result, []string) {
	t.Helper()
	return lostHostRunAs(t, shared, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, src, lostOn, notIdempotent...)
}

// lostHostRunAs is lostHostRunStore where an activity on the lost host
// ends as lostAs says: no worker took it (schedule-to-start), or one took
// it and fell silent (heartbeat). A parameter, not a variable the tests
// share: an activity a run left behind may still read it as the next
// run starts.
func lostHostRunAs(t *testing.T, shared bool, lostAs enumspb.TimeoutType, src string, lostOn map[string]time.Duration, notIdempotent ...string) (*wfapi.Result, []string) {
	t.Helper()
	rr := resolvedFrom(t, src)
	rr.HostQueue = hostA
	for i := range rr.Steps {
		if slices.Contains(notIdempotent, rr.Steps[i].ID) {
			rr.Steps[i].Idempotent = false
		}
		if strings.HasPrefix(rr.Steps[i].ID, "own") {
			rr.Steps[i].TaskQueue = ownQueue
		}
	}
	f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}, behave: map[string]behaviour{}}
	var order []string
	for _, s := range rr.Steps {
		id := s.ID
		f.behave[id] = func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
			q := activity.GetInfo(ctx).TaskQueue
			f.mu.Lock()
			own := q == ownQueue && f.calls[id] == 1 // lost there once: a second try would pass
			f.mu.Unlock()
			if delay, lost := lostOn[id]; lost && (q == hostA || own) {
				time.Sleep(delay)
				return nil, temporal.NewTimeoutError(lostAs, nil)
			}
			f.mu.Lock()
			order = append(order, id+"@"+strings.TrimPrefix(q, "capflow@"))
			f.mu.Unlock()
			return ok(ctx, attempt)
		}
	}
	env := newEnv(t, f)
	env.RegisterActivityWithOptions(func(ctx context.Context, id string) (*wfapi.HostInfo, error) {
		return &wfapi.HostInfo{Queue: hostB, RunDir: "/runs/b", SharedStore: shared}, nil
	}, activity.RegisterOptions{Name: wfapi.HostActivity})
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock() // an activity the run left behind may still append
	defer f.mu.Unlock()
	return &res, slices.Clone(order)
}

// ownQueue is the task queue a tool names of its own: steps whose id
// starts with "own" go there, and are lost there too.
const ownQueue = "gpu"

// silentHostRun is lostHostRun where host A's worker takes the steps in
// lostOn and stops heartbeating (a stopped host's open polls).
func silentHostRun(t *testing.T, src string, lostOn map[string]time.Duration, notIdempotent ...string) (*wfapi.Result, []string) {
	t.Helper()
	return lostHostRunAs(t, false, enumspb.TIMEOUT_TYPE_HEARTBEAT, src, lostOn, notIdempotent...)
}

func before(order []string, a, b string) bool {
	i, j := slices.Index(order, a), slices.Index(order, b)
	return i >= 0 && j >= 0 && i < j
}

// Steps that need a dependency which ran on the lost host wait until it
// ran again on the new host: both of two siblings, not only the first.
func TestMovedRunRepeatsDependenciesOfTheLostHost(t *testing.T) {
	res, order := lostHostRun(t, `name: r
steps:
  - {id: p, capability: x.p}
  - {id: x, capability: x.x}
  - {id: d, capability: x.d, needs: [p, x]}
  - {id: e, capability: x.e, needs: [p, x]}
`, map[string]time.Duration{"x": 0})
	if res.Status != wfapi.StatusPassed || !slices.Equal(res.LostHosts, []string{hostA}) {
		t.Fatalf("%s [%s] lost %v", res.Status, states(res), res.LostHosts)
	}
	if !before(order, "p@host-a", "p@host-b") || !before(order, "p@host-b", "d@host-b") || !before(order, "p@host-b", "e@host-b") {
		t.Fatalf("order %v: p must run again on host b before d and e", order)
	}
}

// A step whose host timeout comes after the run moved checks its
// dependencies too.
func TestLateLostStepRepeatsItsDependency(t *testing.T) {
	res, order := lostHostRun(t, `name: r
steps:
  - {id: a1, capability: x.a}
  - {id: a2, capability: x.a}
  - {id: b, capability: x.b, needs: [a1]}
  - {id: c, capability: x.c, needs: [a2]}
`, map[string]time.Duration{"b": 0, "c": 300 * time.Millisecond})
	if res.Status != wfapi.StatusPassed {
		t.Fatalf("%s [%s]", res.Status, states(res))
	}
	if !before(order, "a1@host-b", "b@host-b") || !before(order, "a2@host-b", "c@host-b") {
		t.Fatalf("order %v: a1 and a2 must run again on host b before b and c", order)
	}
}

// A dependency that is not idempotent is not repeated: the step runs (and
// would fail on its own if it needed that dependency's files).
func TestNotIdempotentDependencyIsNotRepeated(t *testing.T) {
	res, order := lostHostRun(t, `name: r
steps:
  - {id: charge, capability: x.charge}
  - {id: x, capability: x.x}
  - {id: mail, capability: x.mail, needs: [charge, x]}
`, map[string]time.Duration{"x": 0}, "charge")
	if res.Status != wfapi.StatusPassed || slices.Contains(order, "charge@host-b") || !slices.Contains(order, "mail@host-b") {
		t.Fatalf("%s order %v", res.Status, order)
	}
}

// With a shared store, the new host reads what finished steps stored from
// it: no finished step runs again, idempotent or not.
func TestSharedStoreRepeatsNothing(t *testing.T) {
	res, order := lostHostRunStore(t, true, `name: r
steps:
  - {id: p, capability: x.p}
  - {id: x, capability: x.x}
  - {id: d, capability: x.d, needs: [p, x]}
`, map[string]time.Duration{"x": 0})
	// p and x run side by side: which of them is recorded first is the
	// machine's business; d comes after both.
	ran := slices.Sorted(slices.Values(order))
	if res.Status != wfapi.StatusPassed || !slices.Equal(ran, []string{"d@host-b", "p@host-a", "x@host-b"}) ||
		!before(order, "p@host-a", "d@host-b") || !before(order, "x@host-b", "d@host-b") {
		t.Fatalf("%s order %v: p must run once, on host a", res.Status, order)
	}
}

// The items of a for_each step whose host is lost follow the run to
// another host, as a step does, instead of failing (the soak found them
// failing: issue 41).
func TestLostHostItemsMove(t *testing.T) {
	res, order := lostHostRun(t, `name: r
steps:
  - {id: each, capability: x.a, for_each: [a, b, c, d], max_parallel: 2, with: {v: '${item}'}}
  - {id: after, capability: x.b, needs: [each]}
`, map[string]time.Duration{"each": 0})
	if res.Status != wfapi.StatusPassed || !slices.Equal(res.LostHosts, []string{hostA}) {
		t.Fatalf("%s [%s] lost %v: %s", res.Status, states(res), res.LostHosts, res.Message)
	}
	n := 0
	for _, o := range order {
		if o == "each@host-b" {
			n++
		}
	}
	if n != 4 || !slices.Contains(order, "after@host-b") {
		t.Fatalf("order %v: every item, then after, on host b", order)
	}
	if ic := res.Steps[0].ItemCounts; ic == nil || ic.Succeeded != 4 {
		t.Fatalf("items: %+v", res.Steps[0].ItemCounts)
	}
}

// Items of a step that is not idempotent do not move: they fail there.
func TestLostHostItemsOfANonIdempotentStepFail(t *testing.T) {
	res, order := lostHostRun(t, `name: r
steps:
  - {id: each, capability: x.a, for_each: [a, b], with: {v: '${item}'}}
`, map[string]time.Duration{"each": 0}, "each")
	if res.Status != wfapi.StatusFailed || slices.Contains(order, "each@host-b") {
		t.Fatalf("%s [%s] order %v", res.Status, states(res), order)
	}
}

// A step (and an item) whose attempts on the run's host end because
// nothing there heartbeats follows the run to another host; a step that is
// not idempotent fails there (never started twice), and a step on a
// queue of its own is not the host's to move.
func TestSilentHostStepsMove(t *testing.T) {
	res, order := silentHostRun(t, `name: r
steps:
  - {id: a, capability: x.a}
  - {id: each, capability: x.b, for_each: [1, 2], needs: [a], with: {v: '${item}'}}
`, map[string]time.Duration{"a": 0, "each": 0})
	if res.Status != wfapi.StatusPassed || !slices.Equal(res.LostHosts, []string{hostA}) || !slices.Contains(order, "a@host-b") || !slices.Contains(order, "each@host-b") {
		t.Fatalf("%s [%s] lost %v order %v: %s", res.Status, states(res), res.LostHosts, order, res.Message)
	}
	res, order = silentHostRun(t, "name: r\nsteps:\n  - {id: charge, capability: x.a}\n", map[string]time.Duration{"charge": 0}, "charge")
	if res.Status != wfapi.StatusFailed || len(res.LostHosts) != 0 || len(order) != 0 {
		t.Fatalf("not idempotent: %s [%s] lost %v order %v", res.Status, states(res), res.LostHosts, order)
	}
	res, order = silentHostRun(t, "name: r\nsteps:\n  - {id: own, capability: x.a, retry: {max_attempts: 1}}\n", map[string]time.Duration{"own": 0})
	if res.Status != wfapi.StatusFailed || len(res.LostHosts) != 0 || len(order) != 0 {
		t.Fatalf("a step on a queue of its own: %s [%s] lost %v order %v", res.Status, states(res), res.LostHosts, order)
	}
}

// An item waiting for the Host activity to find the next host is not
// started meanwhile when another item of its step comes back to start
// again (the review of issue 41's change found it started on the host
// being replaced): host A is lost at once for item 1 and late for item 0,
// host B for every item, and the second Host activity is slow.
func TestMovingItemWaitsForItsHost(t *testing.T) {
	const hostC = "capflow@host-c"
	rr := resolvedFrom(t, "name: r\nsteps:\n  - {id: each, capability: x.a, for_each: [a, b], with: {v: '${item}'}}\n")
	rr.HostQueue = hostA
	f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}, behave: map[string]behaviour{}}
	var mu sync.Mutex
	ran := map[string]int{} // item@queue -> attempts
	for _, key := range []string{"each[0]", "each[1]"} {
		f.behave[key] = func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
			q := activity.GetInfo(ctx).TaskQueue
			mu.Lock()
			ran[key+"@"+strings.TrimPrefix(q, "capflow@")]++
			mu.Unlock()
			switch {
			case q == hostA && key == "each[0]":
				time.Sleep(300 * time.Millisecond)
				fallthrough
			case q == hostA, q == hostB:
				return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			return ok(ctx, attempt)
		}
	}
	env := newEnv(t, f)
	hosts := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, id string) (*wfapi.HostInfo, error) {
		mu.Lock()
		hosts++
		n := hosts
		mu.Unlock()
		if n == 1 {
			return &wfapi.HostInfo{Queue: hostB, RunDir: "/runs/b", SharedStore: true}, nil
		}
		time.Sleep(time.Second)
		return &wfapi.HostInfo{Queue: hostC, RunDir: "/runs/c", SharedStore: true}, nil
	}, activity.RegisterOptions{Name: wfapi.HostActivity})
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if res.Status != wfapi.StatusPassed || ran["each[1]@host-b"] != 1 || ran["each[0]@host-c"] != 1 || ran["each[1]@host-c"] != 1 {
		t.Fatalf("%s [%s]: ran %v", res.Status, states(&res), ran)
	}
}
