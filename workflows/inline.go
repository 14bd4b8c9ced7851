package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// PathInline: the step ran in a batch of inline steps, one local activity
// for the steps started together (docs/manifests.md, execution: inline).
const PathInline = "inline"

// Paths of an inline step before its result (never reported): waiting
// for its batch, and in a batch that runs.
const (
	pathQueued  = "queued"
	pathBatched = "batched"
)

// inlineCall is a started inline step waiting for its batch: what the
// local activity needs if the batch declines it, and the future its
// scheduler already listens to.
type inlineCall struct {
	ctx  workflow.Context
	step wfapi.ResolvedStep
	opts workflow.ActivityOptions
	in   wfapi.RunToolInput
	path *string
	set  workflow.Settable
}

// inlineBatch is a batch's local activity and the steps it runs.
type inlineBatch struct {
	f     workflow.Future
	calls []inlineCall
}

// inline queues an inline step for its batch (flushInline): one local
// activity for the steps started together, one marker a batch, no step
// folder. false: run it as a local activity of its own.
func (s *dispatcher) inline(ctx workflow.Context, step wfapi.ResolvedStep, opts workflow.ActivityOptions, in wfapi.RunToolInput, path *string) (workflow.Future, bool) {
	if !s.local || !step.Local || !step.Inline || ctx.Err() != nil {
		return nil, false
	}
	f, set := workflow.NewFuture(ctx)
	*path = pathQueued
	in.Host = s.rr.HostQueue // an inline command works in the run's folder, on its host
	s.inlineQueue = append(s.inlineQueue, inlineCall{ctx: ctx, step: step, opts: opts, in: in, path: path, set: set})
	if len(s.inlineQueue) >= orDefault(s.rr.InlineBatch, wfapi.DefaultInlineBatch) {
		s.flushInline()
	}
	return f, true
}

// inlineVersion is the run's changeInlineActivity version, asked when its
// first batch is flushed (runs without inline steps record no marker).
func (s *dispatcher) inlineVersion() workflow.Version {
	if !s.inlineAsked {
		s.inlineV, s.inlineAsked = versionOf(s.ctx, changeInlineActivity), true
	}
	return s.inlineV
}

// flushInline starts one local activity for the queued inline steps
// (their results are taken when it ends: takeBatch). Steps cancelled while
// queued end cancelled, unevaluated. Called before the workflow blocks.
func (s *dispatcher) flushInline() {
	if len(s.inlineQueue) == 0 {
		return
	}
	if s.inlineVersion() == workflow.DefaultVersion {
		s.flushRecorded()
		return
	}
	calls := s.dropCancelled()
	s.inlineQueue = nil
	if len(calls) == 0 {
		return
	}
	ins := make([]wfapi.RunToolInput, len(calls))
	for i, c := range calls {
		ins[i] = c.in
		*c.path = pathBatched
	}
	o := s.withinDeadline(workflow.ActivityOptions{StartToCloseTimeout: wfapi.InlineBatchTime + time.Minute}, true)
	lopts := workflow.LocalActivityOptions{StartToCloseTimeout: o.StartToCloseTimeout, ScheduleToCloseTimeout: o.ScheduleToCloseTimeout,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}, Summary: fmt.Sprintf("inline: %d steps", len(calls))}
	f := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(s.ctx, lopts), wfapi.RunInlineActivity, ins)
	s.inlineBatches = append(s.inlineBatches, inlineBatch{f: f, calls: calls})
}

// takeBatch hands a batch's results to its steps; the steps it had no
// bytes or time left for go to the next batch; what it declined (or all
// of it, when it evaluated none) runs as local activities of their own.
func (s *dispatcher) takeBatch(b inlineBatch) {
	var out wfapi.InlineBatch
	if err := b.f.Get(s.ctx, &out); err != nil {
		out = wfapi.InlineBatch{}
	}
	s.taskBegan()
	s.inlineDone++ // its marker
	for i, c := range b.calls {
		switch {
		case c.ctx.Err() != nil:
			*c.path = PathInline
			c.set.Set(nil, temporal.NewCanceledError())
		case i < len(out.Outcomes) && out.Outcomes[i].OK && out.Outcomes[i].Result != nil:
			s.inlineBytes += out.Outcomes[i].Size
			s.inlineSteps++
			*c.path = PathInline
			c.set.Set(*out.Outcomes[i].Result, nil)
		case i >= len(out.Outcomes) && len(out.Outcomes) > 0:
			// Past the batch's bytes or time: the next batch.
			*c.path = pathQueued
			s.inlineQueue = append(s.inlineQueue, c)
		default:
			s.declineInline(c)
		}
	}
}

// flushRecorded is flushInline for runs recorded before inline batches
// were local activities: they evaluated each batch in a SideEffect, whose
// recorded results a replay reads. Such a run going on live gets empty
// batches: its steps run as local activities.
func (s *dispatcher) flushRecorded() {
	for len(s.dropCancelled()) > 0 {
		if s.taskBegan(); s.inlineFull {
			if s.ctx.Err() == nil {
				return
			}
			s.declineAll(s.inlineQueue)
			return
		}
		if s.evalRecorded() {
			return
		}
	}
}

// dropCancelled ends the queued steps whose context is done (their run or
// batch stopped) as cancelled, and returns the queue left.
func (s *dispatcher) dropCancelled() []inlineCall {
	kept := s.inlineQueue[:0]
	for _, c := range s.inlineQueue {
		if c.ctx.Err() != nil {
			*c.path = PathInline
			c.set.Set(nil, temporal.NewCanceledError())
			continue
		}
		kept = append(kept, c)
	}
	s.inlineQueue = kept
	return kept
}

// evalRecorded takes one recorded batch of the queue (one SideEffect
// marker) and hands its results on; it reports whether the task's budget
// ran out (the rest waited for the next task).
func (s *dispatcher) evalRecorded() (full bool) {
	calls := s.inlineQueue
	var b wfapi.InlineBatch
	if err := workflow.SideEffect(s.ctx, func(workflow.Context) any { return wfapi.InlineBatch{} }).Get(&b); err != nil {
		b = wfapi.InlineBatch{Stop: true}
	}
	s.inlineDone++ // a marker
	s.inlineSpent += b.Elapsed
	n := min(len(b.Outcomes), len(calls))
	for i, o := range b.Outcomes[:n] {
		c := calls[i]
		if !o.OK || o.Result == nil {
			s.declineInline(c)
			continue
		}
		s.inlineBytes += o.Size
		s.inlineSteps++
		*c.path = PathInline
		c.set.Set(*o.Result, nil)
	}
	s.inlineQueue = calls[n:]
	if n == 0 {
		s.declineAll(calls)
		return false
	}
	s.inlineFull = s.inlineFull || b.Stop
	return b.Stop
}

// declineAll runs every given queued step as a local activity and empties
// the queue.
func (s *dispatcher) declineAll(calls []inlineCall) {
	s.inlineQueue = nil
	for _, c := range calls {
		s.declineInline(c)
	}
}

// declineInline runs a queued inline step as a local activity, its future
// set when that ends.
func (s *dispatcher) declineInline(c inlineCall) {
	f := s.runLocal(c.ctx, c.step, c.opts, c.in, c.path)
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

// awaitTool has sel deliver f to done, or, for an inline step waiting for its
// batch, keeps it for settle: a batch's results are then taken in the
// order the steps started, all at once, without a selector's one event a
// turn (a fan-out would otherwise make one batch a step).
func (s *dispatcher) awaitTool(sel workflow.Selector, f workflow.Future, path *string, done func(workflow.Future)) {
	if *path != pathQueued {
		sel.AddFuture(f, done)
		return
	}
	s.pendingInline = append(s.pendingInline, pendingInline{f: f, path: path, done: done})
}

// settle starts the queued inline steps' batch (flushInline) and hands
// the results there are to their drivers in the order the steps started;
// a batch's local activity goes to sel (its results are then taken all at
// once), and so does a declined step's. It reports whether any result was
// handed on: the driver then starts what became ready before it blocks.
func (s *dispatcher) settle(sel workflow.Selector) bool {
	s.flushInline()
	for _, b := range s.inlineBatches {
		sel.AddFuture(b.f, func(workflow.Future) { s.takeBatch(b) })
	}
	s.inlineBatches = nil
	pending := s.pendingInline
	s.pendingInline = nil
	ran := false
	for _, p := range pending {
		switch {
		case p.f.IsReady():
			p.done(p.f)
			ran = true
		case *p.path == pathQueued || *p.path == pathBatched:
			s.pendingInline = append(s.pendingInline, p)
		default:
			sel.AddFuture(p.f, p.done)
		}
	}
	return ran
}
