package wfapi

import "time"

// Inline steps (docs/manifests.md, execution: inline): pure builtins the
// worker evaluates inside the workflow task. The workflow queues the steps
// it starts and has them evaluated together, in one SideEffect per batch;
// what a batch recorded is all that steers the run, so a replay never
// evaluates anything.

// InlineBatch is what one evaluation of queued inline steps recorded: an
// outcome for each of the first len(Outcomes) steps. Stop: the workflow
// task's budget (time, or bytes of results) ran out, so the steps after
// them wait for the next task (or, when none was evaluated, run as local
// activities); without Stop they go to the next batch (this one's results
// reached MaxInlineBatchBytes).
type InlineBatch struct {
	Outcomes []InlineOutcome `json:"outcomes"`
	Stop     bool            `json:"stop,omitempty"`
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

// InlineContext is what a batch's evaluator is told beside the steps: the
// workflow it runs in (an inline command works in that run's folder, as
// RunTool does in its activity's), and what the batch may still spend of
// its workflow task's time and bytes for inline results.
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
	// InlineTaskTime is how long inline evaluation may take in one
	// workflow task: far under the SDK's one-second deadlock detection and
	// the task's timeout; past it, steps run as local activities.
	InlineTaskTime = 300 * time.Millisecond
	// DefaultInlineBatch is how many started inline steps wait for their
	// batch before it is evaluated (recorded per run: ResolveResult).
	DefaultInlineBatch = 256
)
