package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// A step's input in history is bounded (docs/limits.md): one whose with,
// referenced inputs, dependencies' data or item value would pass
// wfapi.MaxInputBytes is stored as a blob in the run folder, and the
// activity gets its reference. Runs recorded before this replay as they
// ran.
const spillInputsChange = "spill-inputs"

// fitInput returns in as it may travel: itself when small, else with
// what it reads moved to a blob.
func (e *executor) fitInput(in wfapi.RunToolInput) wfapi.RunToolInput {
	// encoding/json sorts map keys: the same size and digest on replay.
	//workflowcheck:ignore
	raw, err := json.Marshal(in)
	if err != nil || len(raw) <= wfapi.MaxInputBytes {
		return in
	}
	if workflow.GetVersion(e.ctx, spillInputsChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return in
	}
	sp := wfapi.Spill{With: in.Step.With, Inputs: in.Inputs, Deps: in.Deps}
	if it := in.Step.Item; it != nil {
		sp.Value, sp.ForEach = it.Value, it.ForEach
	}
	sum := sha256.Sum256(raw)
	name := "input-" + hex.EncodeToString(sum[:8]) + ".json"
	opts := onHost(e.rr, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: localRetry,
		Summary: in.Step.ID + " · store its large input"})
	b, err := storeBlob(e.ctx, opts, name, sp)
	if err != nil {
		// The input goes inline, as before: the server takes it up to its
		// hard limit, and a step past that fails, naming the size.
		workflow.GetLogger(e.ctx).Warn("cannot store a large step input; sending it inline", "step", in.Step.ID, "bytes", len(raw), "error", err)
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
