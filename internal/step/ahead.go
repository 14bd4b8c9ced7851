package step

import (
	"encoding/json"
	"time"

	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

// ahead evaluates the steps that follow a batch's, in order, each once
// the steps it comes after succeeded here: their data filled in as the
// workflow will (through JSON, as it reads them from the marker), and its
// outcome keyed by the input it then had. Only pure builtins run ahead:
// a step the workflow ends up not starting, or starts with other input,
// must have done nothing.
func (e *Executor) ahead(b *wfapi.InlineBatch, calls []wfapi.RunToolInput, follow []wfapi.InlineFollow, wc wfapi.InlineContext, start time.Time, size int) {
	done := map[string]*wfapi.RunToolResult{}
	for i, o := range b.Outcomes {
		if o.OK && calls[i].Step.Item == nil {
			done[calls[i].Step.ID] = o.Result
		}
	}
	for _, f := range follow {
		if time.Since(start) >= wc.Time || size >= wc.Bytes {
			return
		}
		call, ok := f.Filled(done)
		if !ok {
			continue
		}
		res, ok := e.inline(call, wc, false)
		if o := bounded(res, ok); o.OK {
			a := wfapi.InlineAhead{ID: call.Step.ID, Key: wfapi.InlineKey(call), InlineOutcome: o}
			size += o.Size + len(a.ID) + len(a.Key) + aheadEntry
			b.Ahead = append(b.Ahead, a)
			done[call.Step.ID] = o.Result
		}
	}
}

// aheadEntry is what an outcome evaluated ahead adds to a marker beside
// its result, its ID and its key (the field names, quotes, its size).
const aheadEntry = 40

// First evaluates, for Resolve, the inline steps a run starts with and
// those that follow them (FirstFollowers): the run's first batch, with no
// local activity of its own (baseline 4). It gets what a batch gives the
// steps it evaluates ahead, of time and bytes; the workflow takes an
// outcome only for a step that starts with the input it was evaluated
// with (wfapi.InlineKey).
func (e *Executor) First(rr *wfapi.ResolveResult, workflowID string) []wfapi.InlineAhead {
	if !e.evaluatesAhead() {
		return nil
	}
	follow := FirstFollowers(rr.Steps, rr.Inputs, rr.InlineBatch)
	if len(follow) == 0 {
		return nil
	}
	for i := range follow {
		// The run's names, which the key leaves out: a tool runner tells
		// runs by them (a plan test's stand-in gives its case's data).
		follow[i].Call.WorkflowID, follow[i].Call.RunDir = workflowID, rr.RunDir
	}
	var b wfapi.InlineBatch
	wc := wfapi.InlineContext{WorkflowID: workflowID, Time: wfapi.InlineBatchTime / aheadShare, Bytes: firstBytes}
	e.ahead(&b, nil, follow, wc, time.Now(), 0)
	return b.Ahead
}

// firstBytes bounds what Resolve's result records of outcomes: a batch's
// share for steps ahead, beside a resolution that may be large itself.
const firstBytes = wfapi.MaxInlineBatchBytes / 4

// FirstFollowers are the steps of a run not yet begun that may be
// evaluated ahead (wfapi.ResolvedStep.MayRunAhead) with every dependency
// evaluated before them, at most limit, each after those it needs. Each
// call is the one the workflow will build, through JSON as it reads the
// resolution from Resolve's marker, and none the workflow would store by
// reference.
func FirstFollowers(steps []wfapi.ResolvedStep, inputs map[string]any, limit int) []wfapi.InlineFollow {
	in, out := map[string]bool{}, []wfapi.InlineFollow(nil)
	no := map[string]bool{}
	for grew := true; grew && len(out) < limit; {
		grew = false
		for _, st := range steps {
			if len(out) == limit || in[st.ID] || no[st.ID] || !allIn(st.Deps, in) {
				continue
			}
			f, ok := firstFollow(st, inputs, in)
			if !ok {
				no[st.ID] = true
				continue
			}
			in[st.ID], grew = true, true
			out = append(out, f)
		}
	}
	return out
}

// firstFollow is step st's wfapi.InlineFollow after the steps in (ok false
// when it may not be evaluated ahead).
func firstFollow(st wfapi.ResolvedStep, inputs map[string]any, in map[string]bool) (wfapi.InlineFollow, bool) {
	if !st.MayRunAhead() {
		return wfapi.InlineFollow{}, false
	}
	f := wfapi.InlineFollow{Call: wfapi.RunToolInput{Step: wfapi.CallOf(st)}, After: st.Deps}
	ok := true
	plan.EachRef(st.With, func(name string) {
		if v, has := inputs[name]; has {
			if f.Call.Inputs == nil {
				f.Call.Inputs = map[string]any{}
			}
			f.Call.Inputs[name] = v
		}
	}, func(id string, data bool) {
		if f.Reads == nil {
			f.Reads = map[string]bool{}
		}
		f.Reads[id] = f.Reads[id] || data
		ok = ok && in[id]
	})
	raw, err := json.Marshal(f.Call)
	if !ok || err != nil || len(raw) > wfapi.MaxInputBytes {
		return wfapi.InlineFollow{}, false
	}
	var call wfapi.RunToolInput
	if json.Unmarshal(raw, &call) != nil {
		return wfapi.InlineFollow{}, false
	}
	f.Call = call
	return f, true
}

// allIn reports whether every id is in set.
func allIn(ids []string, set map[string]bool) bool {
	for _, id := range ids {
		if !set[id] {
			return false
		}
	}
	return true
}

// evaluatesAhead reports whether steps are evaluated before they start:
// not by a plan test's stand-in tools, which count a step's calls, and
// their order, as the DAG starts it.
func (e *Executor) evaluatesAhead() bool { return !e.Given }

// maxInlineInputs bounds an inline step's inputs once its references are
// filled in (a value many references share is counted each time, as its
// digest and its tool read it): past it, the step is a local activity's.
const maxInlineInputs = 4 * wfapi.MaxInputBytes
