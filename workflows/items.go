package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/wfapi"
)

// ItemBatch is how many items of a for_each step one workflow runs: past
// it, batches of ItemBatch items run as child ItemsWorkflows, so no
// history nears Temporal's 10,240-event warning (an item costs ~3 events).
var ItemBatch = wfapi.DefaultItemBatch

// maxBatchResult bounds the item data a batch returns (payloads are
// limited to 2 MB); past it items keep their statuses only.
const maxBatchResult = 1 << 20

// ItemsWorkflow runs one batch of a for_each step's items, up to
// MaxParallel at a time, and returns each item's outcome.
func ItemsWorkflow(ctx workflow.Context, in wfapi.ItemsInput) (*wfapi.ItemsResult, error) {
	// A batch is its run's own child: a client that starts one directly
	// could name any tool and any folder.
	if p := workflow.GetInfo(ctx).ParentWorkflowExecution; p == nil || p.ID != in.WorkflowID {
		return nil, temporal.NewNonRetryableApplicationError("an ItemsWorkflow runs only as a batch of its run's for_each step", string(caperr.InvalidInput), nil)
	}
	in, err := loadItemsInput(ctx, in)
	if err != nil {
		return nil, err
	}
	ctx = withLineage(withLocal(ctx), in.Lineage)
	b := &itemBatch{ctx: ctx, in: in, sel: workflow.NewSelector(ctx), out: &wfapi.ItemsResult{Items: make([]wfapi.ItemOutcome, len(in.Items))},
		x: newDispatcher(ctx, &wfapi.ResolveResult{RunDir: in.RunDir, HostQueue: in.HostQueue, RunSettings: wfapi.RunSettings{
			LocalFlush: in.LocalFlush, LocalAttempts: in.LocalAttempts, InlineFlushBytes: in.InlineFlushBytes, InlineBatch: in.InlineBatch}}, in.WorkflowID)}
	b.run()
	for k := b.next; k < len(in.Items); k++ {
		b.out.Items[k] = wfapi.ItemOutcome{Index: in.Items[k].Index, Status: wfapi.StepCancelled, Reason: "not started: the batch was stopped"}
	}
	workflow.GetLogger(ctx).Info("items batch done", "step", in.Step.ID, "items", len(in.Items), "failures", b.failures)
	return b.out, nil
}

// itemBatch is a batch's state while it runs: its items started (next),
// running and failed, the size of the results it keeps, and whether it
// was stopped.
type itemBatch struct {
	ctx                           workflow.Context
	in                            wfapi.ItemsInput
	x                             dispatcher
	sel                           workflow.Selector
	out                           *wfapi.ItemsResult
	running, next, failures, size int
	cancels                       []workflow.CancelFunc
	stopped                       bool
}

// run starts items while the batch's parallelism allows (and no inline
// batch is due), stops after too many failures or when cancelled, and
// returns once every started item ended.
func (b *itemBatch) run() {
	par := max(b.in.MaxParallel, 1)
	for {
		for !b.stopped && b.next < len(b.in.Items) && b.running < par && (b.running == 0 || !b.x.inlineDue()) {
			b.launch()
		}
		if dag.BatchStops(b.failures, b.in.StopAfterFailures) && !b.stopped {
			b.stop()
		}
		if !b.x.settle(b.sel) {
			if b.running == 0 && (b.stopped || b.next >= len(b.in.Items)) {
				return
			}
			b.sel.Select(b.ctx)
		}
		b.x.flushLocal()
		if b.ctx.Err() != nil && !b.stopped {
			b.stop()
		}
	}
}

func (b *itemBatch) stop() {
	b.stopped = true
	for _, c := range b.cancels {
		c()
	}
}

// launch starts the next item's RunTool.
func (b *itemBatch) launch() {
	k, in := b.next, b.in
	item := in.Items[k]
	b.next++
	b.running++
	opts := b.x.itemOptions(in.Step, item.Index)
	cctx, cancel := workflow.WithCancel(b.ctx)
	b.cancels = append(b.cancels, cancel)
	call := in.Step
	rin := wfapi.RunToolInput{WorkflowID: in.WorkflowID, RunDir: in.RunDir, Inputs: in.Inputs, Deps: in.Deps,
		Step: wfapi.StepCall{ID: call.ID, Capability: call.Capability, Tool: call.Tool, Version: call.Version, Digest: call.Digest, Idempotent: call.Idempotent, With: call.With, CacheTTL: call.CacheTTL,
			Item: &wfapi.ItemCall{ForEach: in.ForEach, ItemName: call.ItemName, Index: item.Index, Value: item.Value, HasValue: item.HasValue}}}
	rin = b.x.fitInput(rin)
	rin.Lineage = in.Lineage
	var path string
	f := b.x.runTool(cctx, in.Step, opts, rin, &path)
	b.x.awaitTool(b.sel, f, &path, func(f workflow.Future) {
		b.running--
		keep := b.size < maxBatchResult
		o := itemOutcome(b.ctx, &b.x, in.Step, item.Index, f, b.stopped, keep)
		if keep && o.Status == wfapi.StepSucceeded {
			b.size += approxSize(o.Data)
		}
		if o.Status == wfapi.StepFailed {
			b.failures++
		}
		b.out.Items[k] = o
	})
}

// loadItemsInput is the batch's input: in, or, spilled, what its run's
// folder holds (digest checked), with in's lineage.
func loadItemsInput(ctx workflow.Context, in wfapi.ItemsInput) (wfapi.ItemsInput, error) {
	b := in.Spilled
	if b == nil {
		return in, nil
	}
	var full wfapi.ItemsInput
	opts := onHost(&wfapi.ResolveResult{HostQueue: in.HostQueue}, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: localRetry, Summary: "load the batch's input"})
	err := loadBlob(ctx, opts, in.WorkflowID, *b, &full)
	if err == nil && (full.WorkflowID != in.WorkflowID || full.Spilled != nil) {
		err = fmt.Errorf("it is not a batch of run %s", in.WorkflowID)
	}
	if err != nil {
		return in, temporal.NewNonRetryableApplicationError("cannot load the batch's input: "+err.Error(), string(caperr.ObservabilityError), nil)
	}
	full.Lineage = in.Lineage
	return full, nil
}

// itemOutcome is how an item's RunTool ended; its data is kept when
// keepData (the batch's result has room).
func itemOutcome(ctx workflow.Context, x *dispatcher, step wfapi.ResolvedStep, index int, f workflow.Future, stopped, keepData bool) wfapi.ItemOutcome {
	var res wfapi.RunToolResult
	o := wfapi.ItemOutcome{Index: index}
	err := f.Get(ctx, &res)
	if err == nil {
		o.Status, o.Attempts = wfapi.StepSucceeded, int(res.Attempt)
		if keepData {
			o.Data = res.Envelope.Data
		}
		return o
	}
	d := x.decode(step, err, "")
	o.Status, o.Attempts, o.Reason = wfapi.StepFailed, d.attempts, d.env.Message
	if d.env.Error != nil {
		o.Code = d.env.Error.Code
		if o.Code == caperr.Cancelled && (stopped || ctx.Err() != nil) {
			o.Status = wfapi.StepCancelled
		}
	}
	return o
}

// approxSize estimates a JSON value's size without encoding it.
func approxSize(v any) int {
	switch t := v.(type) {
	case string:
		return len(t) + 2
	case map[string]any:
		n := 2
		for _, k := range sortedKeys(t) {
			n += len(k) + 4 + approxSize(t[k])
		}
		return n
	case []any:
		n := 2
		for _, x := range t {
			n += approxSize(x) + 1
		}
		return n
	}
	return 8
}
