package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// inlineWay queues the inline steps started together and runs them as
// one local activity (flush): one marker a batch, no step folder. What a
// batch declines runs the local way. In this workflow task, done batches
// recorded bytes of results and took spent, and full is set once one said
// the task's budget ran out; steps counts the inline steps this workflow
// (this segment of the run) evaluated; v is changeInlineActivity's
// version, once asked.
type inlineWay struct {
	done, bytes int
	spent       time.Duration
	full        bool
	queue       []inlineCall    // started, waiting for their batch
	pending     []pendingInline // the queued steps' futures and their drivers' ends (settle)
	batches     []inlineBatch   // started since the last settle
	steps       int
	v           workflow.Version
	asked       bool
	// ahead are the outcomes batches evaluated ahead, by step (ahead.go).
	ahead map[string]wfapi.InlineAhead
}

func (w *inlineWay) newTask() { w.done, w.bytes, w.spent, w.full = 0, 0, 0, false }

// inlineCall is a started inline step waiting for its batch: what the
// local way needs if the batch declines it, and the future its driver
// already listens to.
type inlineCall struct {
	unit
	set workflow.Settable
}

// inlineBatch is a batch's local activity and the steps it runs.
type inlineBatch struct {
	f     workflow.Future
	calls []inlineCall
}

// start queues u for its batch, flushed when the batch is full or before
// the workflow blocks (settle).
func (w *inlineWay) start(d *dispatcher, u unit) workflow.Future {
	u.in.Host = d.rr.HostQueue // an inline command works in the run's folder, on its host
	if f, ok := w.takeAhead(u); ok {
		return f
	}
	f, set := workflow.NewFuture(u.ctx)
	*u.path = pathQueued
	w.queue = append(w.queue, inlineCall{unit: u, set: set})
	if len(w.queue) >= d.p.inlineBatch {
		w.flush(d)
	}
	return f
}

// due reports whether this task's inline steps used its budget: starting
// more of them waits for flushLocal. It reads the counts as they stand (no
// new task is looked for): runs with no inline steps start steps exactly
// as they did before inline steps existed.
func (w *inlineWay) due(d *dispatcher) bool {
	return w.full || (w.done > 0 && w.bytes >= d.p.inlineFlushBytes)
}

// version is the run's changeInlineActivity version, asked when its
// first batch is flushed (runs without inline steps record no marker).
func (w *inlineWay) version(d *dispatcher) workflow.Version {
	if !w.asked {
		w.v, w.asked = versionOf(d.ctx, changeInlineActivity), true
	}
	return w.v
}

// flush starts one local activity for the queued inline steps
// (their results are taken when it ends: take). Steps cancelled while
// queued end cancelled, unevaluated. Called before the workflow blocks.
func (w *inlineWay) flush(d *dispatcher) {
	if len(w.queue) == 0 {
		return
	}
	if w.version(d) == workflow.DefaultVersion {
		w.flushRecorded(d)
		return
	}
	calls := w.dropCancelled(d)
	w.queue = nil
	if len(calls) == 0 {
		return
	}
	ins := make([]wfapi.RunToolInput, len(calls))
	ids := make([]string, 0, len(calls))
	for i, c := range calls {
		ins[i] = c.in
		*c.path = pathBatched
		if c.in.Step.Item == nil {
			ids = append(ids, c.in.Step.ID)
		}
	}
	o := d.withinDeadline(workflow.ActivityOptions{StartToCloseTimeout: wfapi.InlineBatchTime + time.Minute}, true)
	lopts := workflow.LocalActivityOptions{StartToCloseTimeout: o.StartToCloseTimeout, ScheduleToCloseTimeout: o.ScheduleToCloseTimeout,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}, Summary: fmt.Sprintf("inline: %d steps", len(calls))}
	// A local activity gets its arguments as they are, all of them (none
	// is recorded): runs before baseline 3 pass no followers.
	follow := w.aheadOf(d, ids)
	if len(follow) > 0 {
		lopts.Summary += fmt.Sprintf(", up to %d after them", len(follow))
	}
	f := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(d.ctx, lopts), wfapi.RunInlineActivity, ins, follow)
	w.batches = append(w.batches, inlineBatch{f: f, calls: calls})
}

// take hands a batch's results to its steps; the steps it had no
// bytes or time left for go to the next batch; what it declined (or all
// of it, when it evaluated none) runs as local activities of their own.
func (w *inlineWay) take(d *dispatcher, b inlineBatch) {
	var out wfapi.InlineBatch
	if err := b.f.Get(d.ctx, &out); err != nil {
		out = wfapi.InlineBatch{}
	}
	d.taskBegan()
	w.done++ // its marker
	w.keepAhead(out.Ahead)
	for i, c := range b.calls {
		switch {
		case c.ctx.Err() != nil:
			*c.path = PathInline
			c.set.Set(nil, temporal.NewCanceledError())
		case i < len(out.Outcomes) && out.Outcomes[i].OK && out.Outcomes[i].Result != nil:
			w.bytes += out.Outcomes[i].Size
			w.hand(c.set, c.path, *out.Outcomes[i].Result)
		case i >= len(out.Outcomes) && len(out.Outcomes) > 0:
			// Past the batch's bytes or time: the next batch.
			*c.path = pathQueued
			w.queue = append(w.queue, c)
		default:
			w.decline(d, c)
		}
	}
}

// hand gives an inline step its result: it ran inline.
func (w *inlineWay) hand(set workflow.Settable, path *string, res wfapi.RunToolResult) {
	w.steps++
	*path = PathInline
	set.Set(res, nil)
}

// flushRecorded is flush for runs recorded before inline batches
// were local activities: they evaluated each batch in a SideEffect, whose
// recorded results a replay reads. Such a run going on live gets empty
// batches: its steps run as local activities.
func (w *inlineWay) flushRecorded(d *dispatcher) {
	for len(w.dropCancelled(d)) > 0 {
		if d.taskBegan(); w.full {
			if d.ctx.Err() == nil {
				return
			}
			w.declineAll(d, w.queue)
			return
		}
		if w.evalRecorded(d) {
			return
		}
	}
}

// dropCancelled ends the queued steps whose context is done (their run or
// batch stopped) as cancelled, and returns the queue left.
func (w *inlineWay) dropCancelled(d *dispatcher) []inlineCall {
	kept := w.queue[:0]
	for _, c := range w.queue {
		if c.ctx.Err() != nil {
			*c.path = PathInline
			c.set.Set(nil, temporal.NewCanceledError())
			continue
		}
		kept = append(kept, c)
	}
	w.queue = kept
	return kept
}

// evalRecorded takes one recorded batch of the queue (one SideEffect
// marker) and hands its results on; it reports whether the task's budget
// ran out (the rest waited for the next task).
func (w *inlineWay) evalRecorded(d *dispatcher) (full bool) {
	calls := w.queue
	var b wfapi.InlineBatch
	if err := workflow.SideEffect(d.ctx, func(workflow.Context) any { return wfapi.InlineBatch{} }).Get(&b); err != nil {
		b = wfapi.InlineBatch{Stop: true}
	}
	w.done++ // a marker
	w.spent += b.Elapsed
	n := min(len(b.Outcomes), len(calls))
	for i, o := range b.Outcomes[:n] {
		c := calls[i]
		if !o.OK || o.Result == nil {
			w.decline(d, c)
			continue
		}
		w.bytes += o.Size
		w.hand(c.set, c.path, *o.Result)
	}
	w.queue = calls[n:]
	if n == 0 {
		w.declineAll(d, calls)
		return false
	}
	w.full = w.full || b.Stop
	return b.Stop
}

// declineAll runs every given queued step as a local activity and empties
// the queue.
func (w *inlineWay) declineAll(d *dispatcher, calls []inlineCall) {
	w.queue = nil
	for _, c := range calls {
		w.decline(d, c)
	}
}

// decline runs a queued inline step the local way, its future set when
// that ends.
func (w *inlineWay) decline(d *dispatcher, c inlineCall) {
	f := d.ways.local.start(d, c.unit)
	workflow.Go(c.ctx, func(gctx workflow.Context) {
		var out wfapi.RunToolResult
		err := f.Get(gctx, &out)
		c.set.Set(out, err)
	})
}

// pendingInline is a queued inline step's future, its path (pathQueued
// while it waits for its batch) and what its driver does when it ends.
type pendingInline struct {
	f    workflow.Future
	path *string
	done func(workflow.Future)
}

// await has sel deliver f to done, or, for an inline step waiting for its
// batch, keeps it for settle: a batch's results are then taken in the
// order the steps started, all at once, without a selector's one event a
// turn (a fan-out would otherwise make one batch a step).
func (w *inlineWay) await(d *dispatcher, sel workflow.Selector, f workflow.Future, path *string, done func(workflow.Future)) {
	if *path != pathQueued {
		sel.AddFuture(f, done)
		return
	}
	w.pending = append(w.pending, pendingInline{f: f, path: path, done: done})
}

// settle starts the queued inline steps' batch (flush) and hands
// the results there are to their drivers in the order the steps started;
// a batch's local activity goes to sel (its results are then taken all at
// once), and so does a declined step's. It reports whether any result was
// handed on: the driver then starts what became ready before it blocks.
func (w *inlineWay) settle(d *dispatcher, sel workflow.Selector) bool {
	w.flush(d)
	for _, b := range w.batches {
		sel.AddFuture(b.f, func(workflow.Future) { w.take(d, b) })
	}
	w.batches = nil
	pending := w.pending
	w.pending = nil
	ran := false
	for _, p := range pending {
		switch {
		case p.f.IsReady():
			p.done(p.f)
			ran = true
		case *p.path == pathQueued || *p.path == pathBatched:
			w.pending = append(w.pending, p)
		default:
			sel.AddFuture(p.f, p.done)
		}
	}
	return ran
}
