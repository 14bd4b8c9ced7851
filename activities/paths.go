package activities

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// Paths come from the engine, never from history (docs/workflow.md): a
// run's folder is derived from its workflow ID inside runs_dir, and every
// path an activity is handed (a stored output, an envelope, the stored
// steps) is checked to lie in that folder before it is opened.

// RunFolderName is the folder name of a workflow ID (runfolder.Name).
func RunFolderName(id string) string { return runfolder.Name(id) }

// runDir is the folder of one run on this worker.
func (a *Activities) runDir(workflowID string) string {
	cfg := a.Project.Config
	return filepath.Join(cfg.Abs(cfg.RunsDir), RunFolderName(workflowID))
}

// legacyRunDir is where runs started before RunFolderName kept their
// folder (distinct IDs could share one): a run recorded with it goes on
// there.
func (a *Activities) legacyRunDir(workflowID string) string {
	cfg := a.Project.Config
	return filepath.Join(cfg.Abs(cfg.RunsDir), safeName(workflowID))
}

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
	return claimedRun(info.WorkflowExecution.ID, typ, claimed)
}

// claimedRun is the run whose folder work of workflow own (of type typ)
// may use when it names claimed: its own, or, for an ItemsWorkflow batch
// or a sub-plan's run, its parent's (whose ID own starts with, then a dot).
func claimedRun(own, typ, claimed string) (string, error) {
	switch {
	case claimed == "" || claimed == own:
		return own, nil
	case typ == wfapi.ItemsWorkflowType && strings.HasPrefix(own, claimed+"."):
		return claimed, nil
	case typ == wfapi.WorkflowType && strings.HasPrefix(own, claimed+"."):
		// A sub-plan's run reads the inputs its parent stored: its workflow
		// code names the parent only from the server's record of it (a
		// client's parent_inputs are refused before anything runs).
		return claimed, nil
	}
	return "", caperr.New(caperr.InvalidInput, "the activity of workflow %q names run %q", own, claimed)
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
	if recorded != "" && recorded == a.legacyRunDir(id) {
		return recorded, nil
	}
	// Anything else recorded (another host's folder, a forged one) gives
	// way to this worker's folder for the run.
	return a.runDir(id), nil
}

// within checks that path, absolute, lies inside dir (after cleaning;
// symlinks are the tools' business: builtins open through os.Root). A
// relative path from history is never the run folder's.
func within(dir, path string) error {
	if path == "" {
		return nil
	}
	if _, ok := beneath.Rel(dir, path); !ok || !filepath.IsAbs(path) {
		return caperr.New(caperr.InvalidInput, "%s is outside the run folder %s", path, dir)
	}
	return nil
}

// inRun checks paths against the folders of run id on this worker: its
// own, and the one of runs recorded before RunFolderName.
func (a *Activities) inRun(id string, paths ...string) error {
	for _, p := range paths {
		if within(a.runDir(id), p) != nil && within(a.legacyRunDir(id), p) != nil {
			return caperr.New(caperr.InvalidInput, "%s is outside the folder of run %s", p, id)
		}
	}
	return nil
}

// foreignOutcome names the first step (in id order) whose stored output
// lies outside the folder of run id, and its path ("" when none does).
func (a *Activities) foreignOutcome(id string, deps map[string]wfapi.StepOutcome) (string, string) {
	for _, dep := range slices.Sorted(maps.Keys(deps)) {
		if a.inRun(id, deps[dep].DataFile) != nil {
			return dep, deps[dep].DataFile
		}
	}
	return "", ""
}

// appError is the one conversion of a capflow error into a Temporal one:
// its type is the contract code, retryable as the code table says
// (docs/envelope.md); details ride along.
func appError(err error, details ...any) error {
	code := caperr.CodeOf(err)
	return temporal.NewApplicationErrorWithOptions(err.Error(), string(code), temporal.ApplicationErrorOptions{
		NonRetryable: !caperr.Lookup(code).Retryable, Details: details})
}

// StepFailed is a failed step's activity error (RunTool's, and plan
// tests' answers): its code as the type, retryable only when the code is
// and the tool is idempotent, the result (its envelope) in the details.
func StepFailed(code caperr.Code, idempotent bool, res *wfapi.RunToolResult) error {
	retryable := caperr.Lookup(code).Retryable && idempotent && !notRetryable(res.Envelope.Error)
	return temporal.NewApplicationErrorWithOptions(res.Envelope.Message, string(code), temporal.ApplicationErrorOptions{
		NonRetryable: !retryable, Details: []any{res}})
}

// notRetryable: a failure the tool, or capflow for a code it does not
// know, marked not to retry although its code is retryable.
func notRetryable(e *envelope.ErrorInfo) bool {
	return e != nil && e.Code == caperr.ToolFailure && !e.Retryable
}
