package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/expr"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

// forEach is a for_each step's items. The items are the step's
// activities; the step is running until every item has ended.
type forEach struct {
	items   []*itemState
	next    int // the next item to consider starting
	running int
	// list holds the items' values when the workflow has the list in its
	// history (inline): items then carry their value, not the whole list.
	list   []any
	inline bool
	// abandoned: the step stopped its own items (too many failed).
	abandoned bool
	// itemsOmitted: an item's data was stored by reference (over 256 KB),
	// so the aggregate's items cannot hold it.
	itemsOmitted bool
	// batch: more than ItemBatch items run as child ItemsWorkflows, one
	// batch at a time.
	batch        bool
	batchRunning bool
	batchPar     int
	batchNo      int
	batchCancel  workflow.CancelFunc
}

type itemState struct {
	status   wfapi.StepState
	attempts int
	reason   string
	env      *envelope.Envelope
	cancel   workflow.CancelFunc
}

// maxAggregate bounds the aggregate data a for_each step keeps in history;
// beyond it the items' data is left out (each item's own result has it).
const maxAggregate = 256 << 10

// evalWhen evaluates a step's condition in the workflow. ok is false when
// a step it reads stored its data in a file: then the Decide activity
// evaluates it.
func (s *scheduler) evalWhen(st *stepState) (run, ok bool) {
	scope, deps, inline := s.inlineScope(whenExpr(st.step.When))
	if !inline {
		return false, false
	}
	// Pure: CEL over the values recorded in history.
	//workflowcheck:ignore
	run, err := expr.Eval(st.step.When, scope.Inputs, wfapi.Conditions(deps, func(id string) any { return deps[id].Data }), "", nil, 0)
	if err != nil {
		hint := ""
		for _, id := range sortedKeys(deps) {
			if deps[id].Status == wfapi.StepSkipped || deps[id].Status == wfapi.StepFailed {
				hint = fmt.Sprintf(" (step %s %s, so it has no data: guard with steps.%s.success)", id, deps[id].Status, id)
				break
			}
		}
		st.env = s.synthEnvelope(st.step.Tool, caperr.InvalidInput, fmt.Sprintf("when %q: %v%s", st.step.When, err, hint))
		st.started = workflow.Now(s.ctx)
		s.move(st, wfapi.StepRunning, "")
		s.move(st, wfapi.StepFailed, st.env.Message)
		s.checkStop()
		s.afterEnd(st.step.ID)
		return false, true
	}
	if !run {
		s.skipWhenFalse(st)
		return false, true
	}
	return true, true
}

// skipWhenFalse ends a step whose condition is false: skipped, never a
// failure, left out of its dependents' joins.
func (s *scheduler) skipWhenFalse(st *stepState) {
	if st.status != wfapi.StepPending && st.status != wfapi.StepRunning {
		return
	}
	st.whenFalse = true
	s.move(st, wfapi.StepSkipped, "when: false")
	s.afterEnd(st.step.ID)
}

// afterEnd re-examines the dependents of a step that just ended.
func (s *scheduler) afterEnd(id string) {
	for _, d := range s.dependents[id] {
		s.examine(d)
	}
}

// decide asks the Decide activity for a for_each step's items (or a
// condition over stored data).
func (s *scheduler) decide(st *stepState) {
	step := st.step
	s.inflight++
	in := wfapi.DecideInput{StepID: step.ID, ForEach: step.ForEach, ItemName: step.ItemName, When: step.When}
	in.Inputs, in.Deps = s.referenced(step.ForEach, whenExpr(step.When))
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(s.ctx, onHost(s.rr, workflow.ActivityOptions{
		ActivityID: "decide-" + step.ID, StartToCloseTimeout: 2 * time.Minute, RetryPolicy: localRetry,
		Summary: step.ID + " · decide: for_each items and when",
	})))
	st.cancel = cancel
	st.started = workflow.Now(s.ctx)
	s.move(st, wfapi.StepRunning, "")
	f := workflow.ExecuteActivity(actx, wfapi.DecideActivity, in)
	id := step.ID
	s.sel.AddFuture(f, func(f workflow.Future) {
		s.inflight--
		st := s.steps[id]
		var out wfapi.DecideResult
		err := f.Get(s.ctx, &out)
		if err == nil && s.stopped {
			// The run stopped while the decision travelled: start nothing.
			st.env = s.synthEnvelope(st.step.Tool, caperr.Cancelled, "cancelled: "+s.stopReason)
			s.move(st, wfapi.StepCancelled, s.stopReason)
			s.afterEnd(id)
			return
		}
		if err != nil {
			var canceled *temporal.CanceledError
			if errors.As(err, &canceled) || s.stopped {
				st.env = s.synthEnvelope(st.step.Tool, caperr.Cancelled, "cancelled: "+s.stopReason)
				s.move(st, wfapi.StepCancelled, s.stopReason)
				s.afterEnd(id)
				return
			}
			s.failure(st, err)
			s.endFailed(st, st.env.Message)
			s.afterEnd(id)
			return
		}
		if st.step.ForEach == nil {
			if !out.Run {
				s.skipWhenFalse(st)
				return
			}
			s.move(st, wfapi.StepPending, "")
			s.startOne(st)
			return
		}
		s.expand(st, &out)
	})
}

// expand creates a running for_each step's items.
func (s *scheduler) expand(st *stepState, d *wfapi.DecideResult) {
	fe := &forEach{items: make([]*itemState, d.Count)}
	for i := range fe.items {
		fe.items[i] = &itemState{status: wfapi.StepPending}
	}
	for _, i := range d.Skip {
		if i >= 0 && i < d.Count {
			fe.items[i].status, fe.items[i].reason = wfapi.StepSkipped, "when: false"
		}
	}
	fe.list, fe.inline = s.inlineList(st)
	fe.batch = d.Count > ItemBatch
	st.fe = fe
	if s.finishIfDone(st) {
		return
	}
	s.work = insertSorted(s.work, st.step.ID)
}

func insertSorted(list []string, id string) []string {
	i := sort.SearchStrings(list, id)
	if i < len(list) && list[i] == id {
		return list
	}
	list = append(list, "")
	copy(list[i+1:], list[i:])
	list[i] = id
	return list
}

// inlineList evaluates a for_each step's list in the workflow when every
// value it reads is in history (not stored by reference).
func (s *scheduler) inlineList(st *stepState) ([]any, bool) {
	scope, _, inline := s.inlineScope(st.step.ForEach)
	if !inline {
		return nil, false
	}
	// Pure: references resolved over values in history.
	//workflowcheck:ignore
	v, err := scope.Eval(st.step.ForEach)
	list, ok := v.([]any)
	if err != nil || !ok {
		return nil, false
	}
	return list, true
}

// itemCall is what an item's activity needs: its value, or the list's
// source and its index.
func (s *scheduler) itemCall(st *stepState, index int) (*wfapi.ItemCall, map[string]any, map[string]wfapi.StepOutcome) {
	step := st.step
	call := &wfapi.ItemCall{ItemName: step.ItemName, Index: index}
	if st.fe.inline {
		call.Value, call.HasValue = st.fe.list[index], true
		inputs, deps := s.referenced(step.With)
		return call, inputs, deps
	}
	call.ForEach = step.ForEach
	inputs, deps := s.referenced(step.With, step.ForEach)
	return call, inputs, deps
}

// startItems starts items of running for_each steps, in step id order,
// within the plan's and each step's max_parallel.
func (s *scheduler) startItems() {
	for k := 0; k < len(s.work) && !s.stopped; {
		st := s.steps[s.work[k]]
		fe := st.fe
		if fe.batch {
			if !fe.batchRunning && fe.next < len(fe.items) && !s.full() {
				s.startBatch(st)
			}
			if fe.next >= len(fe.items) {
				s.work = append(s.work[:k], s.work[k+1:]...)
				continue
			}
			k++
			continue
		}
		limit := st.step.MaxParallel
		for fe.next < len(fe.items) && !s.full() && (limit <= 0 || fe.running < limit) {
			it := fe.items[fe.next]
			if it.status == wfapi.StepPending {
				s.startItem(st, fe.next)
			}
			fe.next++
		}
		if fe.next >= len(fe.items) {
			s.work = append(s.work[:k], s.work[k+1:]...)
			continue
		}
		if s.full() {
			return
		}
		k++
	}
}

func (s *scheduler) startItem(st *stepState, index int) {
	step := st.step
	it := st.fe.items[index]
	s.inflight++
	st.fe.running++
	label := wfapi.ItemLabel(step.ID, index)
	opts := s.activityOptions(step)
	opts.ActivityID = "step-" + label
	opts.Summary = wfapi.StepSummary(label, step.Capability, step.Tool, step.Version)
	cctx, cancel := workflow.WithCancel(s.ctx)
	call, inputs, deps := s.itemCall(st, index)
	in := wfapi.RunToolInput{WorkflowID: s.res.WorkflowID, RunDir: s.rr.RunDir, Inputs: inputs, Deps: deps,
		Step: wfapi.StepCall{ID: step.ID, Tool: step.Tool, Version: step.Version, Digest: step.Digest, Idempotent: step.Idempotent, With: step.With, Item: call}}
	it.cancel, it.status = cancel, wfapi.StepRunning
	var path string
	f := s.runTool(cctx, step, opts, in, &path)
	id := step.ID
	s.sel.AddFuture(f, func(f workflow.Future) { s.completeItem(id, index, f) })
}

func (s *scheduler) completeItem(id string, index int, f workflow.Future) {
	s.inflight--
	st := s.steps[id]
	st.fe.running--
	it := st.fe.items[index]
	var out wfapi.RunToolResult
	err := f.Get(s.ctx, &out)
	switch {
	case err == nil:
		env := out.Envelope
		if out.DataFile != "" {
			// Stored by reference: the aggregate keeps no stub in its place.
			env.Data = nil
			st.fe.itemsOmitted = true
		}
		it.env, it.attempts, it.status = &env, int(out.Attempt), wfapi.StepSucceeded
	default:
		// The item's failure decoded like a step's (codes, attempts).
		tmp := &stepState{step: st.step}
		s.failure(tmp, err)
		it.env, it.attempts, it.reason = tmp.env, tmp.attempts, tmp.env.Message
		it.status = wfapi.StepFailed
		if tmp.env.Error != nil && tmp.env.Error.Code == caperr.Cancelled && (s.stopped || s.cancelled || st.fe.abandoned) {
			it.status = wfapi.StepCancelled
		}
	}
	if !s.finishIfDone(st) && it.status == wfapi.StepFailed && s.itemFailuresExceeded(st) && s.rr.FailurePolicy != plan.ContinueAll {
		// More items failed than tolerated: under fail_fast and
		// critical_path the step's outcome is known; stop its other items.
		s.abandonItems(st, "more items failed than tolerate allows")
	}
}

// itemFailuresExceeded reports whether more items failed than tolerated.
func (s *scheduler) itemFailuresExceeded(st *stepState) bool {
	c := itemCounts(st.fe)
	return c.Failed > st.step.Tolerate.Allowed(c.Count-c.Skipped)
}

// abandonItems cancels a for_each step's running items and drops the ones
// not started.
func (s *scheduler) abandonItems(st *stepState, reason string) {
	st.fe.abandoned = true
	if st.fe.batchRunning && st.fe.batchCancel != nil {
		st.fe.batchCancel()
	}
	for _, it := range st.fe.items {
		switch {
		case it.status == wfapi.StepRunning && it.cancel != nil:
			it.cancel()
		case it.status == wfapi.StepPending:
			it.status, it.reason = wfapi.StepCancelled, "not started: "+reason
		}
	}
	s.finishIfDone(st)
}

func itemCounts(fe *forEach) wfapi.ItemCounts {
	c := wfapi.ItemCounts{Count: len(fe.items)}
	for _, it := range fe.items {
		switch it.status {
		case wfapi.StepSucceeded:
			c.Succeeded++
		case wfapi.StepFailed:
			c.Failed++
		case wfapi.StepSkipped:
			c.Skipped++
		case wfapi.StepRunning:
			c.Running++
		}
	}
	return c
}

// finishIfDone ends a for_each step whose items have all ended: its data
// is {count, succeeded, failed, items}; it fails when more items failed
// than tolerate allows.
func (s *scheduler) finishIfDone(st *stepState) bool {
	if st.status != wfapi.StepRunning {
		return false
	}
	cancelled := 0
	for _, it := range st.fe.items {
		switch it.status {
		case wfapi.StepPending, wfapi.StepRunning:
			return false
		case wfapi.StepCancelled:
			cancelled++
		}
	}
	c := itemCounts(st.fe)
	items := make([]any, len(st.fe.items))
	var firstFail *itemState
	for i, it := range st.fe.items {
		if it.status == wfapi.StepSucceeded && it.env != nil {
			items[i] = it.env.Data
		}
		if it.status == wfapi.StepFailed && firstFail == nil {
			firstFail = it
		}
	}
	data := map[string]any{"count": c.Count, "succeeded": c.Succeeded, "failed": c.Failed, "skipped": c.Skipped, "items": items}
	// Marshalling only measures the data (map keys are sorted): deterministic.
	//workflowcheck:ignore
	if b, _ := json.Marshal(data); len(b) > maxAggregate || st.fe.itemsOmitted {
		data["items"] = []any{}
		data["items_omitted"] = fmt.Sprintf("%d bytes of item data (or an item's data stored by reference): see each item's result", len(b))
	}
	allowed := st.step.Tolerate.Allowed(c.Count - c.Skipped)
	msg := fmt.Sprintf("%d items: %d succeeded, %d failed, %d skipped", c.Count, c.Succeeded, c.Failed, c.Skipped)
	id := st.step.ID
	switch {
	case cancelled > 0 && (s.stopped || s.cancelled) && c.Failed <= allowed:
		env := s.synthEnvelope(st.step.Tool, caperr.Cancelled, "cancelled: "+s.stopReason)
		env.Data = data
		st.env = env
		s.move(st, wfapi.StepCancelled, s.stopReason)
	case c.Failed > allowed || cancelled > 0:
		code := caperr.ToolFailure
		if firstFail != nil && firstFail.env != nil && firstFail.env.Error != nil {
			code = firstFail.env.Error.Code
		}
		why := fmt.Sprintf("%s (tolerate %d)", msg, allowed)
		if firstFail != nil {
			why += ": first failure: " + firstFail.reason
		}
		env := s.synthEnvelope(st.step.Tool, code, why)
		env.Data = data
		st.env = env
		s.endFailed(st, why)
	default:
		ts := envelope.Timestamp(workflow.Now(s.ctx))
		st.env = &envelope.Envelope{ToolID: st.step.Tool, Success: true, Timestamp: ts, Message: msg, Data: data,
			Feedback: []envelope.Feedback{{Phase: "items", Level: envelope.LevelInfo, Message: msg, Timestamp: ts}}}
		s.move(st, wfapi.StepSucceeded, "")
	}
	st.attempts = 1
	s.afterEnd(id)
	return true
}

// itemResults lists a for_each step's items for the result.
func itemResults(fe *forEach) []wfapi.ItemResult {
	n := min(len(fe.items), wfapi.MaxItemResults)
	out := make([]wfapi.ItemResult, 0, n)
	for i := 0; i < n; i++ {
		it := fe.items[i]
		out = append(out, wfapi.ItemResult{Index: i, Status: it.status, Attempts: it.attempts, Reason: it.reason})
	}
	return out
}

// startBatch runs the next ItemBatch pending items of a large for_each
// step as a child ItemsWorkflow.
func (s *scheduler) startBatch(st *stepState) {
	step, fe := st.step, st.fe
	var items []wfapi.BatchItem
	for fe.next < len(fe.items) && len(items) < ItemBatch {
		i := fe.next
		fe.next++
		if fe.items[i].status != wfapi.StepPending {
			continue
		}
		bi := wfapi.BatchItem{Index: i}
		if fe.inline {
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
	stopAfter := -1
	if s.rr.FailurePolicy != plan.ContinueAll {
		c := itemCounts(fe)
		stopAfter = max(step.Tolerate.Allowed(c.Count-c.Skipped)-c.Failed, 0)
	}
	in := wfapi.ItemsInput{WorkflowID: s.res.WorkflowID, RunDir: s.rr.RunDir, HostQueue: s.rr.HostQueue, Step: step, Items: items, MaxParallel: par, StopAfterFailures: stopAfter}
	if fe.inline {
		in.Inputs, in.Deps = s.referenced(step.With)
	} else {
		in.ForEach = step.ForEach
		in.Inputs, in.Deps = s.referenced(step.With, step.ForEach)
	}
	fe.batchNo++
	cctx, cancel := workflow.WithCancel(workflow.WithChildOptions(s.ctx, workflow.ChildWorkflowOptions{
		WorkflowID:    fmt.Sprintf("%s.%s.items-%d", s.res.WorkflowID, step.ID, fe.batchNo),
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
	fe.running -= len(items)
	var out wfapi.ItemsResult
	err := f.Get(s.ctx, &out)
	byIndex := map[int]wfapi.ItemOutcome{}
	for _, o := range out.Items {
		byIndex[o.Index] = o
	}
	ts := envelope.Timestamp(workflow.Now(s.ctx))
	failed := false
	for _, bi := range items {
		it := fe.items[bi.Index]
		o, ok := byIndex[bi.Index]
		switch {
		case !ok || err != nil:
			it.status, it.reason = wfapi.StepCancelled, "the batch ended early"
			if err != nil && !s.stopped {
				it.status, it.reason = wfapi.StepFailed, "the batch failed: "+err.Error()
				it.env = s.synthEnvelope(st.step.Tool, caperr.ToolFailure, it.reason)
				failed = true
			}
		case o.Status == wfapi.StepSucceeded:
			it.status, it.attempts = o.Status, o.Attempts
			it.env = &envelope.Envelope{ToolID: st.step.Tool, Success: true, Timestamp: ts, Message: "ok", Data: o.Data}
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
	if s.stopped {
		for _, it := range fe.items {
			if it.status == wfapi.StepPending {
				it.status, it.reason = wfapi.StepCancelled, "not started: "+s.stopReason
			}
		}
	}
	if !s.finishIfDone(st) && failed && s.itemFailuresExceeded(st) && s.rr.FailurePolicy != plan.ContinueAll {
		s.abandonItems(st, "more items failed than tolerate allows")
	}
}

// inlineScope gathers what the values reference, as a scope the workflow
// can evaluate itself; inline is false when a referenced step stored its
// data in a file (then an activity evaluates).
func (s *scheduler) inlineScope(values ...any) (scope plan.Scope, deps map[string]wfapi.StepOutcome, inline bool) {
	inputs, deps := s.referenced(values...)
	scope = plan.Scope{Inputs: inputs, Steps: map[string]plan.StepOutcome{}}
	for _, id := range sortedKeys(deps) {
		o := deps[id]
		if o.DataFile != "" {
			return scope, deps, false
		}
		scope.Steps[id] = plan.StepOutcome{Success: o.Success, Data: o.Data}
	}
	return scope, deps, true
}
