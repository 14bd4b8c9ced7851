package dag

import "github.com/capflow/capflow/internal/plan"

// Tally counts a for_each step's items by state.
type Tally struct {
	Count, Succeeded, Failed, Skipped, Running, Cancelled, Open int
}

// Add counts one item.
func (t *Tally) Add(s State) {
	t.Count++
	switch s {
	case Succeeded:
		t.Succeeded++
	case Failed:
		t.Failed++
	case Skipped:
		t.Skipped++
	case Cancelled:
		t.Cancelled++
	case Running:
		t.Running++
	}
	if s.Open() {
		t.Open++
	}
}

// Allowed is how many items may fail: tolerate over the items that were
// not skipped by their condition.
func (t Tally) Allowed(tol *plan.Tolerate) int { return tol.Allowed(t.Count - t.Skipped) }

// Exceeded reports whether more items failed than tolerated.
func (t Tally) Exceeded(tol *plan.Tolerate) bool { return t.Failed > t.Allowed(tol) }

// ItemsEnd is how a for_each step whose items all ended ends: cancelled
// when the run stopped and cancelled items left no failure past
// tolerate; failed when more items failed than tolerated (or items were
// cancelled by the step itself); succeeded otherwise. done is false while
// items are still open.
func ItemsEnd(t Tally, tol *plan.Tolerate, runStopped bool) (to State, done bool) {
	if t.Open > 0 {
		return Running, false
	}
	allowed := t.Allowed(tol)
	switch {
	case t.Cancelled > 0 && runStopped && t.Failed <= allowed:
		return Cancelled, true
	case t.Failed > allowed || t.Cancelled > 0:
		return Failed, true
	}
	return Succeeded, true
}

// BatchStopAfter is how many of a batch's items may still fail before the
// batch stops starting more (what tolerate still allows a step whose
// items so far tally t), or -1: never, under continue_all.
func BatchStopAfter(t Tally, tol *plan.Tolerate, policy string) int {
	if policy == plan.ContinueAll {
		return -1
	}
	return max(t.Allowed(tol)-t.Failed, 0)
}

// BatchStops reports whether a batch that saw failures of its items
// stops starting more (stopAfter from BatchStopAfter).
func BatchStops(failures, stopAfter int) bool { return stopAfter >= 0 && failures > stopAfter }
