package workflows

import (
	"fmt"
	"slices"
	"testing"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// selectOrder drives a selector the way the scheduler does: futures added
// over time, several becoming ready at once, a channel case that stays;
// it answers the order in which cases fired and the most cases the
// compacting selector held.
func selectOrder(ctx workflow.Context, compact bool) ([]string, int, error) {
	var sel workflow.Selector = workflow.NewSelector(ctx)
	cs := newCompactSelector(ctx)
	if compact {
		sel = cs
	}
	var fired []string
	wake := workflow.NewBufferedChannel(ctx, 8)
	sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil); fired = append(fired, "wake") })
	var setters []workflow.Settable
	add := func(n int) {
		for range n {
			f, set := workflow.NewFuture(ctx)
			id := fmt.Sprintf("f%d", len(setters))
			setters = append(setters, set)
			sel.AddFuture(f, func(workflow.Future) { fired = append(fired, id) })
		}
	}
	most := 0
	next := 0
	for round := range 60 {
		add(4)
		// Ready at once, out of the order they were added; a wake-up
		// every few rounds.
		for _, k := range []int{2, 0, 1} {
			if next+k < len(setters) {
				setters[next+k].Set(nil, nil)
			}
		}
		next += 3
		ready := 3
		if round%5 == 0 {
			wake.Send(ctx, true)
			ready++
		}
		for range ready {
			sel.Select(ctx)
			most = max(most, len(cs.cases))
		}
	}
	return fired, most, nil
}

// The compacting selector fires the same cases in the same order as the
// SDK's, and holds no more than about twice the live cases.
func TestCompactSelectorFiresAsTheSDKs(t *testing.T) {
	var got [2][]string
	var most int
	for i, compact := range []bool{false, true} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(func(ctx workflow.Context) ([]string, error) {
			fired, m, err := selectOrder(ctx, compact)
			most = max(most, m)
			return fired, err
		}, workflow.RegisterOptions{Name: "order"})
		env.ExecuteWorkflow("order")
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if err := env.GetWorkflowResult(&got[i]); err != nil {
			t.Fatal(err)
		}
	}
	if len(got[0]) != 192 || !slices.Equal(got[0], got[1]) {
		t.Fatalf("fired %d cases, want 192 (180 futures, 12 wake-ups), in the SDK's order:\n sdk %v\ncompact %v", len(got[0]), got[0], got[1])
	}
	// 240 futures were added and 180 fired: the SDK's selector ends with
	// 241 cases; at most 61 are live at once.
	if most > 61+61+3 {
		t.Fatalf("the compacting selector held %d cases", most)
	}
}
