package workflows

import (
	"encoding/json"
	"fmt"
	"sort"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/envelope"
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
	// history: items then carry their value, not the whole list.
	list      []any
	inHistory bool
	// abandoned: the step stopped its own items (too many failed).
	abandoned bool
	// itemsOmitted: the aggregate cannot hold the items' data (omit says
	// why), so no item's is kept; dataBytes is the size of what is kept.
	itemsOmitted bool
	omitted      string
	dataBytes    int
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
	// data is a succeeded item's data while the aggregate can hold it;
	// env a failed or cancelled item's envelope.
	data   any
	env    *envelope.Envelope
	cancel workflow.CancelFunc
	// host is the host queue the item was sent to; moves counts the times
	// it followed the run to another host; moving: it waits (pending) for
	// the Host activity to find the next host, and is not started before.
	host   string
	moves  int
	moving bool
}

// keep records a succeeded item's data for the aggregate while the items'
// data so far fits in it: past maxAggregate the aggregate leaves every
// item's data out, so none is kept (a 100,000-item step held them all,
// 27 MB of worker memory per 10,000 items).
func (fe *forEach) keep(it *itemState, data any) {
	if fe.itemsOmitted {
		return
	}
	// Marshalling only measures the data (map keys are sorted): deterministic.
	//workflowcheck:ignore
	b, _ := json.Marshal(data)
	if fe.dataBytes += len(b) + 1; fe.dataBytes > maxAggregate {
		fe.omit(fmt.Sprintf("over %d bytes of item data: see each item's result", maxAggregate))
		return
	}
	it.data = data
}

// omit leaves the items' data out of the aggregate, and drops what was
// kept of it.
func (fe *forEach) omit(why string) {
	if fe.itemsOmitted {
		return
	}
	fe.itemsOmitted, fe.omitted = true, why
	for _, it := range fe.items {
		if it != nil {
			it.data = nil
		}
	}
}

// maxAggregate bounds the aggregate data a for_each step keeps in history;
// beyond it the items' data is left out (each item's own result has it).
const maxAggregate = 256 << 10

// expand creates a running for_each step's items.
func (s *scheduler) expand(st *stepState, d *wfapi.EvaluateResult) {
	fe := &forEach{items: make([]*itemState, d.Count)}
	for i := range fe.items {
		fe.items[i] = &itemState{status: wfapi.StepPending}
	}
	for _, i := range d.Skip {
		if i >= 0 && i < d.Count {
			fe.items[i].status, fe.items[i].reason = wfapi.StepSkipped, "when: false"
		}
	}
	fe.list, fe.inHistory = s.listFromHistory(st)
	fe.batch = d.Count > s.p.itemBatch
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

// listFromHistory evaluates a for_each step's list in the workflow when every
// value it reads is in history (not stored by reference).
func (s *scheduler) listFromHistory(st *stepState) ([]any, bool) {
	scope, _, inHistory := s.historyScope(st.step.ForEach)
	if !inHistory {
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
	if st.fe.inHistory {
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
	for k := 0; k < len(s.work) && !s.stopped(); {
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
		for fe.next < len(fe.items) && !s.held() && (limit <= 0 || fe.running < limit) {
			it := fe.items[fe.next]
			if it.status == wfapi.StepPending && !it.moving {
				s.startItem(st, fe.next)
			}
			fe.next++
		}
		if fe.next >= len(fe.items) {
			s.work = append(s.work[:k], s.work[k+1:]...)
			continue
		}
		if s.held() {
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
	opts := s.itemOptions(step, index)
	cctx, cancel := workflow.WithCancel(s.stepCtx(step.ID))
	call, inputs, deps := s.itemCall(st, index)
	in := wfapi.RunToolInput{WorkflowID: s.workflowID, RunDir: s.rr.RunDir, Inputs: inputs, Deps: deps,
		Step: wfapi.StepCall{ID: step.ID, Capability: step.Capability, Tool: step.Tool, Version: step.Version, Digest: step.Digest, Idempotent: step.Idempotent, With: step.With, Item: call, CacheTTL: step.CacheTTL}}
	it.cancel, it.status, it.host = cancel, wfapi.StepRunning, s.rr.HostQueue
	in = s.fitInput(in)
	in.Lineage = s.lineage
	var path string
	f := s.runTool(cctx, step, opts, in, &path)
	id := step.ID
	s.awaitTool(s.sel, f, &path, func(f workflow.Future) { s.completeItem(id, index, f) })
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
		it.attempts, it.status = int(out.Attempt), wfapi.StepSucceeded
		if out.DataFile != "" {
			// Stored by reference: the aggregate keeps no stub in its place.
			st.fe.omit("an item's data is stored by reference: see each item's result")
		}
		st.fe.keep(it, out.Envelope.Data)
	case s.itemFollows(st, it, err):
		s.followItemHost(st, index)
		return
	default:
		// The item's failure decoded like a step's (codes, attempts).
		o := s.decode(st.step, err, s.stopReason())
		it.env, it.attempts, it.reason = o.env, o.attempts, o.env.Message
		it.status = wfapi.StepFailed
		if o.env.Error != nil && o.env.Error.Code == caperr.Cancelled && (s.stopped() || st.fe.abandoned) {
			it.status = wfapi.StepCancelled
		}
	}
	s.itemEnded(st, it)
}

// itemEnded finishes the step when its last item ended, or stops its
// other items when more failed than it tolerates.
func (s *scheduler) itemEnded(st *stepState, it *itemState) {
	if !s.finishIfDone(st) && it.status == wfapi.StepFailed && s.itemFailuresExceeded(st) && s.rr.FailurePolicy != plan.ContinueAll {
		// More items failed than tolerated: under fail_fast and
		// critical_path the step's outcome is known; stop its other items.
		s.abandonItems(st, "more items failed than tolerate allows")
	}
}

// itemFailuresExceeded reports whether more items failed than tolerated.
func (s *scheduler) itemFailuresExceeded(st *stepState) bool {
	return tally(st.fe).Exceeded(st.step.Tolerate)
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

// tally counts a for_each step's items by state.
func tally(fe *forEach) dag.Tally {
	var t dag.Tally
	for _, it := range fe.items {
		s, _ := dag.ParseState(string(it.status))
		t.Add(s)
	}
	return t
}

func itemCounts(fe *forEach) wfapi.ItemCounts {
	t := tally(fe)
	return wfapi.ItemCounts{Count: t.Count, Succeeded: t.Succeeded, Failed: t.Failed, Skipped: t.Skipped, Running: t.Running}
}

// finishIfDone ends a for_each step whose items have all ended: its data
// is {count, succeeded, failed, items}; it fails when more items failed
// than tolerate allows.
func (s *scheduler) finishIfDone(st *stepState) bool {
	id := st.step.ID
	if s.m.State(id) != dag.Running {
		return false
	}
	t := tally(st.fe)
	to, done := dag.ItemsEnd(t, st.step.Tolerate, s.stopped())
	if !done {
		return false
	}
	data := s.aggregate(st.fe, t)
	msg := fmt.Sprintf("%d items: %d succeeded, %d failed, %d skipped", t.Count, t.Succeeded, t.Failed, t.Skipped)
	st.attempts = 1
	switch to {
	case dag.Cancelled:
		st.env = s.synthEnvelope(st.step.Tool, caperr.Cancelled, "cancelled: "+s.stopReason())
		st.env.Data = data
		s.m.Cancel(id, s.stopReason())
	case dag.Failed:
		code, why := caperr.ToolFailure, fmt.Sprintf("%s (tolerate %d)", msg, t.Allowed(st.step.Tolerate))
		if ff := firstFailed(st.fe); ff != nil {
			if ff.env != nil && ff.env.Error != nil {
				code = ff.env.Error.Code
			}
			why += ": first failure: " + ff.reason
		}
		st.env = s.synthEnvelope(st.step.Tool, code, why)
		st.env.Data = data
		s.fail(st, why)
	default:
		ts := envelope.Timestamp(workflow.Now(s.ctx))
		st.env = &envelope.Envelope{ToolID: st.step.Tool, Success: true, Timestamp: ts, Message: msg, Data: data,
			Feedback: []envelope.Feedback{{Phase: "items", Level: envelope.LevelInfo, Message: msg, Timestamp: ts}}}
		s.m.Succeed(id)
	}
	return true
}

// aggregate is a for_each step's data: {count, succeeded, failed,
// skipped, items}, without the items past maxAggregate.
func (s *scheduler) aggregate(fe *forEach, t dag.Tally) map[string]any {
	data := map[string]any{"count": t.Count, "succeeded": t.Succeeded, "failed": t.Failed, "skipped": t.Skipped, "items": []any{}}
	if fe.itemsOmitted {
		data["items_omitted"] = fe.omitted
		return data
	}
	items := make([]any, len(fe.items))
	for i, it := range fe.items {
		if it.status == wfapi.StepSucceeded {
			items[i] = it.data
		}
	}
	data["items"] = items
	// Marshalling only measures the data (map keys are sorted): deterministic.
	//workflowcheck:ignore
	if b, _ := json.Marshal(data); len(b) > maxAggregate {
		data["items"] = []any{}
		data["items_omitted"] = fmt.Sprintf("%d bytes of item data: see each item's result", len(b))
	}
	return data
}

func firstFailed(fe *forEach) *itemState {
	for _, it := range fe.items {
		if it.status == wfapi.StepFailed {
			return it
		}
	}
	return nil
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
