package dag

import (
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
)

// A batch of a for_each step stops starting items once more of them
// failed than tolerate still allows the step; under continue_all never.
func TestBatchStop(t *testing.T) {
	two := &plan.Tolerate{Failures: 2}
	half := &plan.Tolerate{Ratio: 0.5}
	for _, c := range []struct {
		name      string
		t         Tally
		tol       *plan.Tolerate
		policy    string
		stopAfter int
		failures  int
		stops     bool
	}{
		{"no tolerance: the first failure stops it", Tally{Count: 10}, nil, plan.FailFast, 0, 1, true},
		{"no failure yet", Tally{Count: 10}, nil, plan.FailFast, 0, 0, false},
		{"two tolerated, one used before the batch", Tally{Count: 10, Failed: 1}, two, plan.FailFast, 1, 1, false},
		{"two tolerated, one used, two more fail", Tally{Count: 10, Failed: 1}, two, plan.FailFast, 1, 2, true},
		{"half of the items not skipped", Tally{Count: 10, Skipped: 2}, half, plan.FailFast, 4, 5, true},
		{"more failed than allowed already", Tally{Count: 10, Failed: 5}, two, plan.FailFast, 0, 1, true},
		{"continue_all never stops", Tally{Count: 10, Failed: 9}, nil, plan.ContinueAll, -1, 100, false},
	} {
		got := BatchStopAfter(c.t, c.tol, c.policy)
		if got != c.stopAfter || BatchStops(c.failures, got) != c.stops {
			t.Errorf("%s: stop after %d (want %d), stops %v (want %v)", c.name, got, c.stopAfter, BatchStops(c.failures, got), c.stops)
		}
	}
}

// A decision moves a waiting step as the table says; retry leaves it to
// the driver to start again; a skip counts as decided (absorbed).
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		d     Decision
		again bool
		to    State
		next  string // what becomes ready after it ("": nothing)
	}{
		{Approve, false, Succeeded, "b"},
		{Reject, false, Failed, ""},
		{FailIt, false, Failed, ""},
		{Skip, false, Skipped, ""},
		{Retry, true, Waiting, ""},
	} {
		m := New([]Step{dep("a"), dep("b", "a")}, plan.ContinueAll, &recorder{})
		startReady(m)
		m.Wait("a", "waits for a person")
		again := m.Decide("a", c.d, caperr.Rejected, "", "decided")
		next, _ := m.NextReady()
		if again != c.again || m.State("a") != c.to || next != c.next || m.Decided("a") != (c.d == Skip) {
			t.Errorf("%s: again %v, a %s, next %q, decided %v", c.d, again, m.State("a"), next, m.Decided("a"))
		}
	}
}
