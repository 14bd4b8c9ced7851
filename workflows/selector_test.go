package workflows

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// selectRecord is what selectOrder saw.
type selectRecord struct {
	Fired []string
	// Most is the most cases the compacting selector held, MostLive the
	// most futures pending at once, Added the futures added in all.
	Most, MostLive, Added int
}

// selectOrder drives a selector the way the scheduler does: futures added
// over time (some from inside a case's callback), several ready at once and
// out of order, others set while Select waits, a channel case that stays,
// and at the end a channel closed while Select waits. It records the order
// in which cases fired.
func selectOrder(ctx workflow.Context, compact bool) (selectRecord, error) {
	var sel workflow.Selector = workflow.NewSelector(ctx)
	cs := newCompactSelector(ctx)
	if compact {
		sel = cs
	}
	var rec selectRecord
	wake, quit := workflow.NewBufferedChannel(ctx, 8), workflow.NewChannel(ctx)
	sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil); rec.Fired = append(rec.Fired, "wake") })
	sel.AddReceive(quit, func(_ workflow.ReceiveChannel, more bool) { rec.Fired = append(rec.Fired, fmt.Sprint("quit ", more)) })
	var setters []workflow.Settable
	pending := 0
	var add func()
	add = func() {
		f, set := workflow.NewFuture(ctx)
		k := len(setters)
		setters, pending = append(setters, set), pending+1
		rec.MostLive = max(rec.MostLive, pending)
		sel.AddFuture(f, func(workflow.Future) {
			pending--
			rec.Fired = append(rec.Fired, fmt.Sprint("f", k))
			if k%9 == 0 {
				add() // a case added while Select runs
			}
		})
	}
	next := 0
	for round := range 50 {
		for range 4 {
			add()
		}
		setters[next+1].Set(nil, nil) // ready at once, out of order
		setters[next].Set(nil, nil)
		later, wakes := setters[next+2], round%5 == 0
		next += 3
		workflow.Go(ctx, func(gctx workflow.Context) {
			_ = workflow.Sleep(gctx, time.Second) // set while Select waits
			later.Set(nil, nil)
			if wakes {
				wake.Send(gctx, true)
			}
		})
		ready := 3
		if wakes {
			ready++
		}
		for range ready {
			sel.Select(ctx)
			rec.Most = max(rec.Most, len(cs.cases))
		}
	}
	workflow.Go(ctx, func(gctx workflow.Context) {
		_ = workflow.Sleep(gctx, time.Second)
		quit.Close()
	})
	sel.Select(ctx) // fires as quit closes
	sel.Select(ctx) // fires again: the SDK drops it only now
	rec.Added = len(setters)
	return rec, nil
}

// The compacting selector fires the same cases in the same order as the
// SDK's, and holds about the live cases, not every case it was given.
func TestCompactSelectorFiresAsTheSDKs(t *testing.T) {
	var got [2]selectRecord
	for i, compact := range []bool{false, true} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (selectRecord, error) {
			return selectOrder(ctx, compact)
		}, workflow.RegisterOptions{Name: "order"})
		env.ExecuteWorkflow("order")
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if err := env.GetWorkflowResult(&got[i]); err != nil {
			t.Fatal(err)
		}
	}
	sdk, compact := got[0], got[1]
	if !slices.Equal(sdk.Fired, compact.Fired) {
		t.Fatalf("the compacting selector fired\n%v\nthe SDK's\n%v", compact.Fired, sdk.Fired)
	}
	// 150 futures and 10 wake-ups fired, then quit twice: closed while
	// Select waited, the SDK fires its case once more (with the value it
	// kept, as if open).
	if n := len(sdk.Fired); n != 162 || sdk.Fired[n-2] != "quit false" || sdk.Fired[n-1] != "quit true" {
		t.Fatalf("fired %d cases, want 162, ending with quit twice: %v", n, sdk.Fired)
	}
	if bound := 2*compact.MostLive + compactAfter + 2; compact.Most > bound || compact.Added+2 <= bound {
		t.Fatalf("the compacting selector held up to %d cases for %d live futures at most (%d added)", compact.Most, compact.MostLive, compact.Added)
	}
}
