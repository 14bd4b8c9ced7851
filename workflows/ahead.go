package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

// Inline steps evaluated ahead (baseline 3). A batch of inline steps also
// evaluates the inline steps that follow it, in its one local activity:
// each idempotent inline tool step, not begun, without a condition, whose
// every dependency has succeeded or is evaluated before it in the batch.
// The workflow keeps their outcomes; a step that then starts (everything
// the driver decides is decided as before) with the very input one was
// evaluated with takes it, and any other runs as it would have. A chain
// of inline steps is one marker, not one a step; what no step takes was
// a pure builtin's evaluation (wfapi.InlineFollow: commands never run
// ahead), which cost its time and its bytes in the marker, and nothing
// else.

// followers are the steps a batch of the steps ids may evaluate after
// them, in an order that puts each after the steps it follows, at most
// the run's inline batch.
func (s *scheduler) followers(ids []string) []wfapi.InlineFollow {
	if s.paused || s.draining || s.stopped() || s.reuse != nil {
		return nil
	}
	in := make(map[string]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	order := append([]string(nil), ids...)
	var out []wfapi.InlineFollow
	for i := 0; i < len(order); i++ {
		for _, id := range s.m.Dependents(order[i]) {
			if len(out) == s.p.inlineBatch {
				return out
			}
			if in[id] {
				continue
			}
			if f, ok := s.follower(id, in); ok {
				in[id] = true
				order = append(order, id)
				out = append(out, f)
			}
		}
	}
	return out
}

// follower is step id's wfapi.InlineFollow when it may be evaluated after
// the steps in (ok false otherwise).
func (s *scheduler) follower(id string, in map[string]bool) (wfapi.InlineFollow, bool) {
	// A step that started once (retried by an operator, run again for a
	// lost output, moved to another host) is started by launch with what
	// only launch adds: not evaluated ahead.
	st := s.steps[id]
	if st == nil || s.m.State(id) != dag.Pending || st.retries > 0 || st.reruns > 0 || st.moves > 0 {
		return wfapi.InlineFollow{}, false
	}
	step := st.step
	if !step.MayRunAhead() {
		return wfapi.InlineFollow{}, false
	}
	f := wfapi.InlineFollow{}
	for _, d := range step.Deps {
		switch {
		case in[d]:
			f.After = append(f.After, d)
		case s.m.State(d) != dag.Succeeded:
			return wfapi.InlineFollow{}, false
		}
	}
	plan.EachRef(step.With, func(string) {}, func(ref string, data bool) {
		if in[ref] {
			if f.Reads == nil {
				f.Reads = map[string]bool{}
			}
			f.Reads[ref] = f.Reads[ref] || data
		}
	})
	// As launch builds it, but for what the key leaves out (its run's
	// names). An input launch would store by reference never matches.
	f.Call = s.toolInput(st)
	if encodedLarge(f.Call) != nil {
		return wfapi.InlineFollow{}, false
	}
	return f, true
}

// takeAhead is u's future resolved with the outcome its batch evaluated
// ahead, when u starts with the input that was evaluated (ok false
// otherwise: u runs as it would have).
func (w *inlineWay) takeAhead(u unit) (workflow.Future, bool) {
	a, ok := w.ahead[u.step.ID]
	if !ok || u.in.Step.Item != nil || u.in.Retry > 0 {
		return nil, false
	}
	delete(w.ahead, u.step.ID)
	if a.Result == nil || a.Key == "" || a.Key != wfapi.InlineKey(u.in) {
		return nil, false
	}
	f, set := workflow.NewFuture(u.ctx)
	w.hand(set, u.path, *a.Result)
	return f, true
}

// forget drops what was evaluated ahead for step id: it started another
// way, and a later start (a retry, a move) runs again.
func (w *inlineWay) forget(id string) { delete(w.ahead, id) }

// keepAhead keeps what a batch evaluated ahead for the steps that start
// next; it is in history now, and counts with the task's results.
func (w *inlineWay) keepAhead(ahead []wfapi.InlineAhead) {
	for _, a := range ahead {
		if w.ahead == nil {
			w.ahead = map[string]wfapi.InlineAhead{}
		}
		w.ahead[a.ID] = a
		w.bytes += a.Size
	}
}

// aheadOf is what a batch of the steps ids may evaluate after them
// (scheduler.followers): nothing for runs before baseline 3, nor for a
// dispatcher that knows no plan (a batch of for_each items).
func (w *inlineWay) aheadOf(d *dispatcher, ids []string) []wfapi.InlineFollow {
	if d.follow == nil || len(ids) == 0 || versionOf(d.ctx, changeBaseline3) < 1 {
		return nil
	}
	return d.follow(ids)
}
