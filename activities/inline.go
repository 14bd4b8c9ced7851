package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
)

// InlineBudget bounds one inline evaluation: it runs inside a workflow
// task, so a slow one gives way to the local activity, whose own limits
// (the builtin's evaluation timeout) then apply.
const InlineBudget = 50 * time.Millisecond

// MaxInlineResult bounds the data an inline evaluation records in history
// (a marker per step); larger data goes through the local activity, which
// stores it by reference.
const MaxInlineResult = 32 << 10

// Inline is the worker's evaluator of inline steps (workflows.Engine); a
// function, not a method, so registering the activities does not take it
// for one.
func Inline(a *Activities) func(wfapi.RunToolInput) (wfapi.RunToolResult, bool) { return a.inline }

// inline evaluates a step of an `execution: inline` builtin in the calling
// goroutine (the workflow's, inside a SideEffect): what RunTool does for
// it, without a step folder, files or heartbeats. ok is false when the step
// must run as a local activity instead: its tool is not inline here, it
// reads stored data or files, it failed (the activity reports a failure,
// with its retries), or it took longer than InlineBudget or returned more
// than MaxInlineResult.
func (a *Activities) inline(in wfapi.RunToolInput) (wfapi.RunToolResult, bool) {
	// As an activity would get it: through JSON (the workflow's values may
	// hold json.Number or typed maps, which builtins do not take).
	if raw, err := json.Marshal(in); err != nil || json.Unmarshal(raw, &in) != nil {
		return wfapi.RunToolResult{}, false
	}
	step := in.Step
	if in.Spilled != nil || (step.Item != nil && !step.Item.HasValue) || step.ReuseFrom != "" {
		return wfapi.RunToolResult{}, false
	}
	m, err := a.manifest(step.Tool, step.Version, step.Digest)
	if err != nil || !m.Inline() {
		return wfapi.RunToolResult{}, false
	}
	for _, d := range in.Deps {
		if d.DataFile != "" || len(d.Artifacts) > 0 {
			return wfapi.RunToolResult{}, false
		}
	}
	scope, _, err := loadScope(in.Inputs, in.Deps)
	if err != nil {
		return wfapi.RunToolResult{}, false
	}
	if it := step.Item; it != nil {
		scope.Item, scope.ItemName, scope.Index = it.Value, it.ItemName, it.Index
	}
	v, err := scope.Eval(step.With)
	inputs, _ := v.(map[string]any)
	if err != nil || inputs == nil || !builtin.Pure(m.Entrypoint.Name, inputs) {
		return wfapi.RunToolResult{}, false
	}
	env := a.Runner.Run(context.Background(), toolrun.Request{Manifest: m, Inputs: inputs, RunID: in.WorkflowID, StepID: step.ID, Attempt: 1, Budget: InlineBudget})
	raw, _ := json.Marshal(env.Data)
	if !env.Success || len(raw) > MaxInlineResult {
		return wfapi.RunToolResult{}, false
	}
	rawIn, _ := json.Marshal(inputs)
	sum := sha256.Sum256(rawIn)
	return wfapi.RunToolResult{Envelope: env, Attempt: 1, InputsSHA256: hex.EncodeToString(sum[:])}, true
}
