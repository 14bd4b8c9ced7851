package activities

import (
	"context"
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// runTool runs one attempt of a step through the executor, adding
// Temporal's side: the run's folder checked, heartbeats from the
// start to the end (fetching inputs from the store, digesting input
// files, storing outputs and the cache entry can take longer than a
// heartbeat timeout too), server outages ridden out, and a failed tool
// turned into an ApplicationError whose type is the contract code and
// whose details carry the envelope.
func (a *Activities) runTool(ctx context.Context, in wfapi.RunToolInput) (*wfapi.RunToolResult, error) {
	info := activity.GetInfo(ctx)
	// Attempts a step made as a local activity before it continued as a
	// regular one count too: the tool and the attempt story see one series.
	at := step.Attempt{Number: info.Attempt + in.AttemptsBefore, RunID: info.WorkflowExecution.RunID, Timeout: info.StartToCloseTimeout,
		Lease: info.HeartbeatTimeout}
	if info.RetryPolicy != nil {
		at.Max = info.RetryPolicy.MaximumAttempts + in.AttemptsBefore
	}
	if in.MaxAttempts > 0 {
		at.Max = in.MaxAttempts
	}
	hb := startBeats(ctx, at)
	defer hb.stop()
	at.OnFeedback, at.OnStderr = hb.feedback, hb.stderr
	at.Bind = func(ctx context.Context) (context.Context, func()) { return a.rideOutOutages(ctx, hb.details) }
	// Before anything is read or written: the folder is this run's, and
	// every stored output it names lies in it.
	runDir, err := a.runFolder(ctx, in.WorkflowID, in.RunDir)
	if err != nil {
		return nil, appError(err)
	}
	in.RunDir = runDir
	if err := a.unspill(ctx, runDir, &in); err != nil {
		return nil, appError(err)
	}
	res, err := a.Exec.Run(ctx, in, at)
	var failed *step.Failed
	var cancelled *step.Cancelled
	switch {
	case errors.As(err, &failed):
		return nil, StepFailed(failed)
	case errors.As(err, &cancelled):
		return nil, Interrupted(ctx, cancelled.Result, wfapi.Heartbeat{Attempt: at.Number, MaxAttempts: at.Max})
	case err != nil:
		return nil, appError(err)
	}
	return res, nil
}

// RunInline runs a batch of inline steps (wfapi.RunInlineActivity), a
// local activity the workflow starts for the steps it started together,
// then the steps that may follow them in it (none for runs before
// baseline 3: their follow is nil; a local activity gets every argument
// its function takes, or panics).
func (a *Activities) RunInline(ctx context.Context, calls []wfapi.RunToolInput, follow []wfapi.InlineFollow) (wfapi.InlineBatch, error) {
	info := activity.GetInfo(ctx)
	return a.Exec.Inline(calls, follow, wfapi.InlineContext{WorkflowID: info.WorkflowExecution.ID, WorkflowType: info.WorkflowType.Name,
		Time: wfapi.InlineBatchTime, Bytes: wfapi.MaxInlineBatchBytes}), nil
}

// Interrupted is the error of an attempt whose context ended: a timeout
// (its type and attempt as details) when its deadline passed, else a
// cancellation. A local activity that returns before the SDK notices its
// deadline keeps the error it returned, so a cancellation there would
// count a timed-out attempt as a cancelled step (issue 54).
func Interrupted(ctx context.Context, res *wfapi.RunToolResult, hb wfapi.Heartbeat) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return temporal.NewCanceledError(res)
	}
	kind := enumspb.TIMEOUT_TYPE_START_TO_CLOSE
	if info := activity.GetInfo(ctx); info.ScheduleToCloseTimeout > 0 && !time.Now().Before(info.ScheduledTime.Add(info.ScheduleToCloseTimeout)) {
		kind = enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE
	}
	return temporal.NewTimeoutError(kind, nil, hb)
}
