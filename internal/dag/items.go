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
