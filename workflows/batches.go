package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

// A for_each step of more than ItemBatch items runs them in batches, each
// a child ItemsWorkflow (items.go), one batch at a time.

// startBatch runs the next ItemBatch pending items of a large for_each
// step as a child ItemsWorkflow.
func (s *scheduler) startBatch(st *stepState) {
	step, fe := st.step, st.fe
	var items []wfapi.BatchItem
	for fe.next < len(fe.items) && len(items) < s.p.itemBatch {
		i := fe.next
		fe.next++
		if fe.items[i].status != wfapi.StepPending {
			continue
		}
		bi := wfapi.BatchItem{Index: i}
		if fe.inHistory {
			bi.Value, bi.HasValue = fe.list[i], true
		}
		fe.items[i].status = wfapi.StepRunning
		items = append(items, bi)
	}
	if len(items) == 0 {
		return
	}
	par := step.MaxParallel
	if room := s.rr.MaxParallel - s.inflight; s.rr.MaxParallel > 0 && (par <= 0 || par > room) {
		par = max(room, 1)
	}
	if par <= 0 {
		par = len(items)
	}
	stopAfter := dag.BatchStopAfter(tally(fe), step.Tolerate, s.rr.FailurePolicy)
	in := wfapi.ItemsInput{WorkflowID: s.workflowID, RunDir: s.rr.RunDir, HostQueue: s.rr.HostQueue, Step: step, Items: items, MaxParallel: par, StopAfterFailures: stopAfter,
		LocalFlush: s.rr.LocalFlush, LocalAttempts: s.rr.LocalAttempts, InlineFlushBytes: s.rr.InlineFlushBytes, InlineBatch: s.rr.InlineBatch}
	if fe.inHistory {
		in.Inputs, in.Deps = s.referenced(step.With)
	} else {
		in.ForEach = step.ForEach
		in.Inputs, in.Deps = s.referenced(step.With, step.ForEach)
	}
	// The batch reads its items' values, or the list's source (in.ForEach),
	// never the step's own list: a literal list would travel whole with
	// every batch.
	in.Step.ForEach = nil
	in = s.fitItems(in)
	in.Lineage = s.lineage
	fe.batchNo++
	cctx, cancel := workflow.WithCancel(workflow.WithChildOptions(s.stepCtx(step.ID), workflow.ChildWorkflowOptions{
		WorkflowID:    fmt.Sprintf("%s.%s.items-%d", s.workflowID, step.ID, fe.batchNo),
		StaticSummary: fmt.Sprintf("%s: items %d to %d of %d", step.ID, items[0].Index, items[len(items)-1].Index, len(fe.items)),
	}))
	fe.batchCancel, fe.batchRunning, fe.batchPar = cancel, true, par
	fe.running += len(items)
	s.inflight += par
	f := workflow.ExecuteChildWorkflow(cctx, wfapi.ItemsWorkflowType, in)
	id := step.ID
	s.sel.AddFuture(f, func(f workflow.Future) { s.completeBatch(id, items, f) })
}

func (s *scheduler) completeBatch(id string, items []wfapi.BatchItem, f workflow.Future) {
	st := s.steps[id]
	fe := st.fe
	s.inflight -= fe.batchPar
	fe.batchRunning = false
	fe.batchCancel() // the batch ended: its context leaves the step's
	fe.running -= len(items)
	var out wfapi.ItemsResult
	err := f.Get(s.ctx, &out)
	byIndex := map[int]wfapi.ItemOutcome{}
	for _, o := range out.Items {
		byIndex[o.Index] = o
	}
	failed := false
	for _, bi := range items {
		it := fe.items[bi.Index]
		o, ok := byIndex[bi.Index]
		switch {
		case !ok || err != nil:
			it.status, it.reason = wfapi.StepCancelled, "the batch ended early"
			if err != nil && !s.stopped() {
				it.status, it.reason = wfapi.StepFailed, "the batch failed: "+err.Error()
				it.env = s.synthEnvelope(st.step.Tool, caperr.ToolFailure, it.reason)
				failed = true
			}
		case o.Status == wfapi.StepSucceeded:
			it.status, it.attempts = o.Status, o.Attempts
			fe.keep(it, o.Data)
		default:
			it.status, it.attempts, it.reason = o.Status, o.Attempts, o.Reason
			code := o.Code
			if code == "" {
				code = caperr.ToolFailure
			}
			it.env = s.synthEnvelope(st.step.Tool, code, o.Reason)
			failed = failed || o.Status == wfapi.StepFailed
		}
	}
	if s.stopped() {
		for _, it := range fe.items {
			if it.status == wfapi.StepPending {
				it.status, it.reason = wfapi.StepCancelled, "not started: "+s.stopReason()
			}
		}
	}
	if !s.finishIfDone(st) && failed && s.itemFailuresExceeded(st) && s.rr.FailurePolicy != plan.ContinueAll {
		s.abandonItems(st, "more items failed than tolerate allows")
	}
}
