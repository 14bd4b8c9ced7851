package wfapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Inline steps (docs/manifests.md, execution: inline): quick tools the
// worker runs on the fast path. The workflow queues the steps it starts
// and has them run together, in one local activity per batch
// (RunInlineActivity): no step folder, no envelope file, one marker a
// batch. Runs recorded before that evaluated a batch inside the workflow
// task, in a SideEffect; they replay as they ran (workflows/versions.go).

// RunInlineActivity runs a batch of inline steps ([]RunToolInput), then
// the steps that may follow them ([]InlineFollow: none before baseline 3),
// and returns an InlineBatch.
const RunInlineActivity = "RunInline"

// InlineBatch is what one batch of queued inline steps returned: an
// outcome for each of the first len(Outcomes) steps; the steps after them
// run as local activities. Stop (runs recorded before the local activity
// batch): the workflow task's budget ran out, so the steps after them
// waited for the next task.
type InlineBatch struct {
	Outcomes []InlineOutcome `json:"outcomes"`
	Stop     bool            `json:"stop,omitempty"`
	// Ahead are the outcomes of the steps the batch evaluated after its
	// own (InlineFollow), each taken only by a step whose input then has
	// its Key.
	Ahead []InlineAhead `json:"ahead,omitempty"`
	// Elapsed is the time the evaluations took.
	Elapsed time.Duration `json:"elapsed"`
}

// InlineOutcome is one step's: its result, or OK false when it runs as a
// local activity instead (it reads files or stored data, failed, took too
// long or returned too much). Size is its result's encoded size.
type InlineOutcome struct {
	OK     bool           `json:"ok"`
	Result *RunToolResult `json:"result,omitempty"`
	Size   int            `json:"size,omitempty"`
}

// InlineFollow is a step a batch may evaluate after its own steps
// (RunInlineActivity's second argument, from baseline 3): a chain of
// inline steps is then one local activity and one marker, not one a step.
// Call is its input as the workflow will build it but for the steps of
// the batch it follows (After): each must succeed in the batch first, and
// those its input reads (Reads: whether their data) are filled in as the
// workflow would (Succeeded).
type InlineFollow struct {
	Call  RunToolInput    `json:"call"`
	After []string        `json:"after"`
	Reads map[string]bool `json:"reads,omitempty"`
}

// Filled is f's input with what it reads of the steps it follows, whose
// results done holds by step: each must be there (ok false otherwise).
// Their data goes through JSON, as the workflow reads it from the marker:
// the input is then the one the workflow builds, with the same key.
func (f InlineFollow) Filled(done map[string]*RunToolResult) (RunToolInput, bool) {
	call := f.Call
	for _, id := range f.After {
		if done[id] == nil {
			return call, false
		}
	}
	if len(f.Reads) == 0 {
		return call, true
	}
	deps := make(map[string]StepOutcome, len(call.Deps)+len(f.Reads))
	for id, o := range call.Deps {
		deps[id] = o
	}
	for id, withData := range f.Reads {
		r := done[id]
		if r == nil {
			return call, false
		}
		var data any
		if raw, err := json.Marshal(r.Envelope.Data); err != nil || json.Unmarshal(raw, &data) != nil {
			return call, false
		}
		deps[id] = Succeeded(data, r.DataFile, r.DataSHA256, r.Artifacts, withData)
	}
	call.Deps = deps
	return call, true
}

// InlineAhead is the outcome of a step a batch evaluated ahead: the
// workflow takes it when the step starts with an input of digest Key
// (InlineKey), and otherwise runs the step as it would have.
type InlineAhead struct {
	ID  string `json:"id"`
	Key string `json:"key"`
	InlineOutcome
}

// InlineKey is the digest of what an inline step is evaluated from (its
// call, the inputs and outcomes it reads): what a step evaluated ahead
// must start with for its outcome to be taken. The run's names (its ID,
// folder, host and lineage) are left out: a replay under another ID, or
// of a reset run, takes what the run took. "" for an input that cannot be
// encoded: it matches nothing.
func InlineKey(in RunToolInput) string {
	k := inlineKeyV1{ID: in.Step.ID, Tool: in.Step.Tool, Version: in.Step.Version, Digest: in.Step.Digest, With: in.Step.With,
		Item: in.Step.Item != nil, ReuseFrom: in.Step.ReuseFrom, Inputs: in.Inputs, Spilled: in.Spilled != nil}
	if len(in.Deps) > 0 {
		k.Deps = make(map[string]outcomeV1, len(in.Deps))
		for id, o := range in.Deps {
			k.Deps[id] = outcomeV1{o.Success, string(o.Status), o.Data, o.DataFile, o.DataSHA256, len(o.Artifacts)}
		}
	}
	// encoding/json sorts map keys: the same digest on replay.
	//workflowcheck:ignore
	raw, err := json.Marshal(k)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}

// inlineKeyV1 is what InlineKey digests, frozen: a replay recomputes the
// key of every step that took an outcome, so a field a later version of
// RunToolInput adds must not change it (a new key is a workflow change).
type inlineKeyV1 struct {
	ID, Tool, Version, Digest string
	With                      map[string]any
	Item                      bool
	ReuseFrom                 string
	Inputs                    map[string]any
	Deps                      map[string]outcomeV1
	Spilled                   bool
}

// outcomeV1 is a dependency's outcome in inlineKeyV1.
type outcomeV1 struct {
	Success              bool
	Status               string
	Data                 any
	DataFile, DataSHA256 string
	Artifacts            int
}

// InlineContext is what a batch's evaluation knows beside the steps: the
// workflow it runs for (an inline command works in that run's folder, as
// RunTool does in its activity's), and what the batch may spend of time
// and bytes of results.
type InlineContext struct {
	WorkflowID   string
	WorkflowType string
	Time         time.Duration
	Bytes        int
}

const (
	// MaxInlineBatchBytes bounds the results one batch records (one
	// marker; a result is at most MaxInlineResult more), far under the
	// 512 KB payload warning.
	MaxInlineBatchBytes = 256 << 10
	// MaxInlineResult bounds one inline step's recorded result (its
	// envelope, data included); a larger one goes through the local
	// activity, which stores it by reference.
	MaxInlineResult = 32 << 10
	// InlineStepTime bounds one inline evaluation: a builtin's, or a
	// command's run (killed at once past it); the step then runs as a
	// local activity, whose own limits apply.
	InlineStepTime = 50 * time.Millisecond
	// InlineBatchTime is how long one batch may take: past it, the steps
	// left run as local activities of their own.
	InlineBatchTime = 5 * time.Second
	// DefaultInlineBatch is how many started inline steps wait for their
	// batch before it is evaluated (recorded per run: ResolveResult).
	DefaultInlineBatch = 256
)

// MayRunAhead reports whether s may be evaluated before it starts (by a
// batch it follows, or by Resolve): an idempotent tool step of an inline
// tool, run locally, without a condition. Whether its builtin is pure for
// its input is the executor's to say.
func (s ResolvedStep) MayRunAhead() bool {
	tool := s.ForEach == nil && !s.Approval && s.Plan == "" && s.Agent == nil
	return tool && s.Local && s.Inline && s.Idempotent && s.When == ""
}

// CallOf is the call of step s as the workflow starts it (the run's
// reuse aside).
func CallOf(s ResolvedStep) StepCall {
	return StepCall{ID: s.ID, Capability: s.Capability, Tool: s.Tool, Version: s.Version, Digest: s.Digest,
		Idempotent: s.Idempotent, With: s.With, CacheTTL: s.CacheTTL}
}
