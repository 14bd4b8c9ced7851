package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// A step's input in history is bounded (docs/limits.md): one whose with,
// referenced inputs, dependencies' data or item value would pass
// wfapi.MaxInputBytes is stored as a blob in the run folder, and the
// activity gets its reference. Runs recorded before this replay as they
// ran.

// fitInput returns in as it may travel: itself when small, else with
// what it reads moved to a blob.
func (e *dispatcher) fitInput(in wfapi.RunToolInput) wfapi.RunToolInput {
	raw, large := e.tooLarge(in)
	if !large {
		return in
	}
	sp := wfapi.Spill{With: in.Step.With, Inputs: in.Inputs, Deps: in.Deps}
	if it := in.Step.Item; it != nil {
		sp.Value, sp.ForEach = it.Value, it.ForEach
	}
	b, ok := e.spill("input", raw, sp, in.Step.ID)
	if !ok {
		return in
	}
	in.Step.With, in.Inputs, in.Deps, in.Spilled = nil, nil, nil, &b
	if in.Step.Item != nil {
		item := *in.Step.Item
		item.Value, item.ForEach = nil, nil
		in.Step.Item = &item
	}
	return in
}

// spill stores v (whose input form raw is too large) as a blob named
// after raw's digest; ok is false when it could not be stored (the input
// then goes in the activity input, as before: the server takes it up to its hard limit).
func (e *dispatcher) spill(kind string, raw []byte, v any, step string) (wfapi.Blob, bool) {
	sum := sha256.Sum256(raw)
	name := kind + "-" + hex.EncodeToString(sum[:8]) + ".json"
	opts := onHost(e.rr, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: localRetry,
		Summary: step + " · store its large input"})
	b, err := storeBlob(e.ctx, opts, e.workflowID, name, v)
	if err != nil {
		workflow.GetLogger(e.ctx).Warn("cannot store a large input; sending it in the activity input", "step", step, "bytes", len(raw), "error", err)
		return b, false
	}
	return b, true
}

// tooLarge encodes v and reports whether it passes wfapi.MaxInputBytes and
// the run may spill it (recorded once the first time it is asked).
func (e *dispatcher) tooLarge(v any) ([]byte, bool) {
	raw := encodedLarge(v)
	return raw, raw != nil && versionOf(e.ctx, changeSpillInputs) != workflow.DefaultVersion
}

// childTooLarge is tooLarge for a sub-plan's inputs, under their change.
func (e *dispatcher) childTooLarge(v any) ([]byte, bool) {
	raw := encodedLarge(v)
	return raw, raw != nil && versionOf(e.ctx, changeChildInputs) != workflow.DefaultVersion
}

// encodedLarge is v encoded when it passes wfapi.MaxInputBytes, else nil.
func encodedLarge(v any) []byte {
	// encoding/json sorts map keys: the same size and digest on replay.
	//workflowcheck:ignore
	raw, err := json.Marshal(v)
	if err != nil || len(raw) <= wfapi.MaxInputBytes {
		return nil
	}
	return raw
}

// fitEvaluate bounds an Evaluate activity's input like a step's.
func (e *dispatcher) fitEvaluate(in wfapi.EvaluateInput) wfapi.EvaluateInput {
	raw, large := e.tooLarge(in)
	if !large {
		return in
	}
	if b, ok := e.spill("decide", raw, in, in.StepID); ok {
		return wfapi.EvaluateInput{StepID: in.StepID, Spilled: &b}
	}
	return in
}

// fitItems bounds a batch's input (a child workflow's) like a step's.
func (e *dispatcher) fitItems(in wfapi.ItemsInput) wfapi.ItemsInput {
	raw, large := e.tooLarge(in)
	if !large {
		return in
	}
	if b, ok := e.spill("items", raw, in, in.Step.ID); ok {
		return wfapi.ItemsInput{WorkflowID: in.WorkflowID, HostQueue: in.HostQueue, Spilled: &b}
	}
	return in
}

// lastSegment stores the steps the last segment of a long run ended as its
// checkpoint n when they would make Finalize's input pass
// wfapi.MaxInputBytes; it returns the blob and whether it did.
func lastSegment(ctx workflow.Context, rr *wfapi.ResolveResult, n int, steps []wfapi.StepResult) (wfapi.Blob, bool) {
	// encoding/json sorts map keys: the same size on replay.
	//workflowcheck:ignore
	raw, err := json.Marshal(steps)
	if err != nil || len(raw) <= wfapi.MaxInputBytes || versionOf(ctx, changeSpillInputs) == workflow.DefaultVersion {
		return wfapi.Blob{}, false
	}
	opts := onHost(rr, carryOptions("", n))
	b, err := storeBlob(ctx, opts, "", fmt.Sprintf("segment-%d.json", n), steps)
	if err != nil {
		workflow.GetLogger(ctx).Warn("cannot store the last segment's steps; sending them in the activity input", "bytes", len(raw), "error", err)
		return b, false
	}
	return b, true
}
