package wfapi

import "time"

// Inline steps (docs/manifests.md, execution: inline): quick tools the
// worker runs on the fast path. The workflow queues the steps it starts
// and has them run together, in one local activity per batch
// (RunInlineActivity): no step folder, no envelope file, one marker a
// batch. Runs recorded before that evaluated a batch inside the workflow
// task, in a SideEffect; they replay as they ran (workflows/versions.go).

// RunInlineActivity runs a batch of inline steps ([]RunToolInput) and
// returns an InlineBatch.
const RunInlineActivity = "RunInline"

// InlineBatch is what one batch of queued inline steps returned: an
// outcome for each of the first len(Outcomes) steps; the steps after them
// run as local activities. Stop (runs recorded before the local activity
// batch): the workflow task's budget ran out, so the steps after them
// waited for the next task.
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
