package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/wfapi"
)

// PathInline: the step's builtin was evaluated inside the workflow task
// (docs/manifests.md, execution: inline), its result recorded in a batch.
const PathInline = "inline"

// pathQueued: an inline step waiting for its batch (never reported: the
// batch sets inline, or local when it declines the step).
const pathQueued = "queued"

// InlineFunc evaluates a batch of inline steps on the worker running the
// workflow (activities.Inline), within budget.
type InlineFunc func(calls []wfapi.RunToolInput, budget wfapi.InlineContext) wfapi.InlineBatch

// Engine is the workflows with the worker's inline evaluator; the worker
// registers its methods. The package's PlanWorkflow and ItemsWorkflow run
// every step as an activity (plan tests, unit tests).
type Engine struct {
	Inline InlineFunc
}

// PlanWorkflow is PlanWorkflow with inline steps evaluated in the workflow.
func (e Engine) PlanWorkflow(ctx workflow.Context, start wfapi.Start) (*client.Result, error) {
	return PlanWorkflow(workflow.WithValue(ctx, inlineKey{}, e.Inline), start)
}

// ItemsWorkflow is ItemsWorkflow with inline items evaluated in the workflow.
func (e Engine) ItemsWorkflow(ctx workflow.Context, in wfapi.ItemsInput) (*wfapi.ItemsResult, error) {
	return ItemsWorkflow(workflow.WithValue(ctx, inlineKey{}, e.Inline), in)
}

type inlineKey struct{}

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

// inline queues an inline step for its batch (flushInline), which costs
// microseconds a step and one marker a batch: no task hand-off, no files.
// false: run it as a local activity (the worker has no evaluator, or the
// run uses none).
func (s *executor) inline(ctx workflow.Context, step wfapi.ResolvedStep, opts workflow.ActivityOptions, in wfapi.RunToolInput, path *string) (workflow.Future, bool) {
	eval, _ := s.ctx.Value(inlineKey{}).(InlineFunc)
	if eval == nil || !s.local || !step.Local || !step.Inline || ctx.Err() != nil {
		return nil, false
	}
	f, set := workflow.NewFuture(ctx)
	*path = pathQueued
	in.Host = s.rr.HostQueue // an inline command works in the run's folder, on its host
	s.inlineQueue = append(s.inlineQueue, inlineCall{ctx: ctx, step: step, opts: opts, in: in, path: path, set: set})
	if len(s.inlineQueue) >= orDefault(s.rr.InlineBatch, wfapi.DefaultInlineBatch) {
		// Evaluated now, so the task's budget (flushDue) sees them.
		s.flushInline()
	}
	return f, true
}

// flushInline evaluates the queued inline steps, in batches of at most
// MaxInlineBatchBytes of results, within what is left of this workflow
// task's time and bytes for them. What a batch declines runs as a local
// activity; what the task had no budget left for waits for the next task,
// or, when nothing at all was evaluated, runs as a local activity too.
// Steps cancelled while queued end cancelled, unevaluated. Called before
// the workflow blocks: every queued step then has a result set, a local
// activity, or a sibling whose result will wake the run.
func (s *executor) flushInline() {
	for len(s.dropCancelled()) > 0 {
		if s.taskBegan(); s.inlineFull {
			if s.ctx.Err() == nil {
				// A batch of this task ran out of its budget, and its
				// results will wake the run, which yields before more.
				return
			}
			// A cancelled run does not yield (flushLocal): no waiting.
			s.declineAll(s.inlineQueue)
			return
		}
		if s.evalBatch() {
			return
		}
	}
}

// dropCancelled ends the queued steps whose context is done (their run or
// batch stopped) as cancelled, and returns the queue left.
func (s *executor) dropCancelled() []inlineCall {
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

// evalBatch evaluates one batch of the queue (one SideEffect, one marker)
// and hands its results on; it reports whether the task's budget ran out
// (the rest wait for the next task).
func (s *executor) evalBatch() (full bool) {
	eval, _ := s.ctx.Value(inlineKey{}).(InlineFunc)
	calls := s.inlineQueue
	ins := make([]wfapi.RunToolInput, len(calls))
	for i, c := range calls {
		ins[i] = c.in
	}
	// Read only inside the SideEffect: a replay never evaluates.
	info := workflow.GetInfo(s.ctx)
	budget := wfapi.InlineContext{WorkflowID: info.WorkflowExecution.ID, WorkflowType: info.WorkflowType.Name,
		Time: wfapi.InlineTaskTime - s.inlineSpent, Bytes: orDefault(s.rr.InlineFlushBytes, wfapi.DefaultInlineFlushBytes) - s.inlineBytes}
	var b wfapi.InlineBatch
	if err := workflow.SideEffect(s.ctx, func(workflow.Context) any { return eval(ins, budget) }).Get(&b); err != nil {
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
		// Nothing evaluated (no budget left): the local activity, so the
		// run always moves on.
		s.declineAll(calls)
		return false
	}
	// The task's budget ran out: the rest wait for the next task; the run
	// yields first (flushDue), and the results already set wake it.
	s.inlineFull = s.inlineFull || b.Stop
	return b.Stop
}

// declineAll runs every given queued step as a local activity and empties
// the queue.
func (s *executor) declineAll(calls []inlineCall) {
	s.inlineQueue = nil
	for _, c := range calls {
		s.declineInline(c)
	}
}

// declineInline runs a queued inline step as a local activity, its future
// set when that ends.
func (s *executor) declineInline(c inlineCall) {
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
func (s *executor) awaitTool(sel workflow.Selector, f workflow.Future, path *string, done func(workflow.Future)) {
	if *path != pathQueued {
		sel.AddFuture(f, done)
		return
	}
	s.pendingInline = append(s.pendingInline, pendingInline{f: f, path: path, done: done})
}

// settle evaluates the queued inline steps (flushInline) and hands their
// results to their drivers in the order they started; a declined step's
// local activity goes to sel, and a step whose batch had no budget left
// stays for the next settle. It reports whether any result was handed on:
// the driver then starts what became ready before it blocks.
func (s *executor) settle(sel workflow.Selector) bool {
	s.flushInline()
	pending := s.pendingInline
	s.pendingInline = nil
	ran := false
	for _, p := range pending {
		switch {
		case p.f.IsReady():
			p.done(p.f)
			ran = true
		case *p.path == pathQueued:
			s.pendingInline = append(s.pendingInline, p)
		default:
			sel.AddFuture(p.f, p.done)
		}
	}
	return ran
}
