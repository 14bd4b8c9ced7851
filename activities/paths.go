package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/step"
)

// RunFolderName is the folder name of a workflow ID (runfolder.Name).
func RunFolderName(id string) string { return runfolder.Name(id) }

// runOf is the workflow ID whose folder an activity works in: its own
// workflow's, or, for an ItemsWorkflow batch, its parent run's (whose ID
// the batch's own ID starts with, then a dot). claimed is the ID
// the input names; a mismatch is refused.
func runOf(ctx context.Context, claimed string) (string, error) {
	if !activity.IsActivity(ctx) {
		return claimed, nil // called directly (unit tests, the CLI)
	}
	info := activity.GetInfo(ctx)
	typ := ""
	if info.WorkflowType != nil {
		typ = info.WorkflowType.Name
	}
	return step.ClaimedRun(info.WorkflowExecution.ID, typ, claimed)
}

// runFolder is the folder an activity of workflow claimedID works in.
// recorded is the folder the run's history names (runs started before
// RunFolderName, or "" to derive): it is accepted only when it is what
// this worker derives for that ID.
func (a *Activities) runFolder(ctx context.Context, claimedID, recorded string) (string, error) {
	id, err := runOf(ctx, claimedID)
	if err != nil {
		return "", err
	}
	if recorded != "" && recorded == a.Exec.LegacyRunDir(id) {
		return recorded, nil
	}
	// Anything else recorded (another host's folder, a forged one) gives
	// way to this worker's folder for the run.
	return a.Exec.RunDir(id), nil
}

// appError is the one conversion of a capflow error into a Temporal one:
// its type is the contract code, retryable as the code table says
// (docs/envelope.md); details ride along.
func appError(err error, details ...any) error {
	code := caperr.CodeOf(err)
	return temporal.NewApplicationErrorWithOptions(err.Error(), string(code), temporal.ApplicationErrorOptions{
		NonRetryable: !caperr.Lookup(code).Retryable, Details: details})
}

// StepFailed is a failed step's activity error: its code as the type,
// retryable by the executor's rule, the result (its envelope) in the
// details.
func StepFailed(f *step.Failed) error {
	return temporal.NewApplicationErrorWithOptions(f.Result.Envelope.Message, string(f.Code), temporal.ApplicationErrorOptions{
		NonRetryable: !f.Retryable(), Details: []any{f.Result}})
}
