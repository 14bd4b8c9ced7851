package step

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"time"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/jsonsize"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
)

// Inline evaluates inline steps in order until their results reach
// the batch's bytes or its time runs out; the steps after them run as
// local activities of their own. Then, within what is left of the bytes
// and at most a fifth of the time (a batch's own steps wait for it), it
// evaluates the steps that follow them (Ahead).
func (e *Executor) Inline(calls []wfapi.RunToolInput, follow []wfapi.InlineFollow, wc wfapi.InlineContext) wfapi.InlineBatch {
	start := time.Now()
	var b wfapi.InlineBatch
	size := 0
	for _, in := range calls {
		if time.Since(start) >= wc.Time || size >= wc.Bytes {
			break
		}
		res, ok := e.inline(in, wc, true)
		o := bounded(res, ok)
		size += o.Size
		b.Outcomes = append(b.Outcomes, o)
	}
	if len(follow) > 0 && e.evaluatesAhead() {
		wc.Time = min(wc.Time-time.Since(start), wc.Time/aheadShare)
		e.ahead(&b, calls, follow, wc, time.Now(), size)
	}
	b.Elapsed = time.Since(start)
	return b
}

// aheadShare: steps evaluated ahead get at most a 1/aheadShare of a
// batch's time.
const aheadShare = 5

// bounded is a step's outcome, OK only when its whole result is within
// MaxInlineResult: a command's message and feedback travel in the marker
// too, not only its data.
func bounded(res wfapi.RunToolResult, ok bool) wfapi.InlineOutcome {
	if !ok {
		return wfapi.InlineOutcome{}
	}
	raw, _ := json.Marshal(res)
	if len(raw) > wfapi.MaxInlineResult {
		return wfapi.InlineOutcome{}
	}
	return wfapi.InlineOutcome{OK: true, Result: &res, Size: len(raw)}
}

// inline evaluates one step of an `execution: inline` tool in its batch's
// local activity: what RunTool does for it, without heartbeats, the
// envelope file, or (for a builtin) a step folder. ok is false when the step must run as a local activity instead:
// its tool is not inline here, it reads stored data or files another host
// may hold, a rerun may reuse it, a command's run is not this host's, it
// failed (the activity reports a failure, with its retries), or it took
// longer than InlineStepTime or returned more than MaxInlineResult. A
// command runs only when commands is set.
func (e *Executor) inline(call wfapi.RunToolInput, wc wfapi.InlineContext, commands bool) (wfapi.RunToolResult, bool) {
	m, err := e.Manifest(call.Step.Tool, call.Step.Version, call.Step.Digest)
	if err != nil || !m.Inline() || (!commands && m.Entrypoint.Type == manifest.EntryCommand) {
		return wfapi.RunToolResult{}, false
	}
	// As a regular activity would get it: through JSON (a local activity
	// gets the workflow's own values, which may hold json.Number or typed
	// maps, which tools do not take, and which the workflow goes on using).
	var in wfapi.RunToolInput
	if raw, err := json.Marshal(call); err != nil || json.Unmarshal(raw, &in) != nil {
		return wfapi.RunToolResult{}, false
	}
	step := in.Step
	if in.Spilled != nil || (step.Item != nil && !step.Item.HasValue) || step.ReuseFrom != "" {
		return wfapi.RunToolResult{}, false
	}
	inputs, ok := inlineInputs(in)
	if !ok || !jsonsize.Within(inputs, maxInlineInputs) {
		return wfapi.RunToolResult{}, false
	}
	var env envelope.Envelope
	switch m.Entrypoint.Type {
	case manifest.EntryBuiltin:
		if !builtin.Pure(m.Entrypoint.Name, inputs) {
			return wfapi.RunToolResult{}, false
		}
		env = e.Tool.Run(context.Background(), toolrun.Request{Manifest: m, Inputs: inputs, RunID: in.WorkflowID, StepID: step.ID, Label: label(step), Attempt: 1, Budget: e.inlineStepTime()})
	case manifest.EntryCommand:
		if env, ok = e.inlineCommand(in, wc, m, inputs); !ok {
			return wfapi.RunToolResult{}, false
		}
	default:
		return wfapi.RunToolResult{}, false
	}
	if !env.Success {
		return wfapi.RunToolResult{}, false
	}
	rawIn, _ := json.Marshal(inputs)
	sum := sha256.Sum256(rawIn)
	return wfapi.RunToolResult{Envelope: env, Attempt: 1, InputsSHA256: hex.EncodeToString(sum[:])}, true
}

// inlineStepTime bounds one inline evaluation.
func (e *Executor) inlineStepTime() time.Duration {
	if e.InlineStepTime > 0 {
		return e.InlineStepTime
	}
	return wfapi.InlineStepTime
}

// inlineInputs evaluates a step's with from the values it carries; ok is
// false when it reads stored data or files (loaded by RunTool, on the
// run's host).
func inlineInputs(in wfapi.RunToolInput) (map[string]any, bool) {
	for _, d := range in.Deps {
		if d.DataFile != "" || len(d.Artifacts) > 0 {
			return nil, false
		}
	}
	scope, _, err := LoadScope(in.Inputs, in.Deps)
	if err != nil {
		return nil, false
	}
	if it := in.Step.Item; it != nil {
		scope.Item, scope.ItemName, scope.Index = it.Value, it.ItemName, it.Index
	}
	v, err := scope.Eval(in.Step.With)
	inputs, _ := v.(map[string]any)
	return inputs, err == nil && inputs != nil
}

// inlineCommand runs an inline command step's tool as RunTool would (its
// step folder in the run's folder, confined by the policy, its secrets),
// killed at once past InlineStepTime. ok is false when it may not run here
// (cached steps go through the activity, and so does another host's run).
func (e *Executor) inlineCommand(in wfapi.RunToolInput, wc wfapi.InlineContext, m *manifest.Manifest, inputs map[string]any) (envelope.Envelope, bool) {
	if in.Step.CacheTTL > 0 || (in.Host != "" && in.Host != e.HostQueue) {
		return envelope.Envelope{}, false
	}
	id, err := ClaimedRun(wc.WorkflowID, wc.WorkflowType, in.WorkflowID)
	if err != nil {
		return envelope.Envelope{}, false
	}
	runDir := e.RunDir(id)
	if in.RunDir != "" && in.RunDir == e.LegacyRunDir(id) {
		runDir = in.RunDir
	}
	mode, net, err := e.reach(m)
	if err != nil {
		return envelope.Envelope{}, false
	}
	env := e.Tool.Run(context.Background(), toolrun.Request{
		Manifest: m, Inputs: inputs, RunID: in.WorkflowID, StepID: in.Step.ID, Label: label(in.Step), Attempt: 1,
		Root: e.Project.Root(), RunDir: runDir, Workdir: stepFolder(runDir, in.Step), Records: recordsFolder(runDir, in.Step),
		Secrets: toolrun.SecretsFromEnv(m, os.LookupEnv), Sandbox: mode, Net: net, Budget: e.inlineStepTime(),
	})
	return env, true
}
