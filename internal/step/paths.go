package step

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// Paths come from the engine, never from history (docs/workflow.md): a
// run's folder is derived from its workflow ID inside runs_dir, and every
// path an attempt is handed (a stored output, an envelope, the stored
// steps) is checked to lie in that folder before it is opened.

// RunDir is the folder of one run on this worker.
func (e *Executor) RunDir(workflowID string) string { return e.Project.RunDir(workflowID) }

// LegacyRunDir is where runs started before runfolder.Name kept their
// folder (distinct IDs could share one): a run recorded with it goes on
// there.
func (e *Executor) LegacyRunDir(workflowID string) string {
	cfg := e.Project.Config
	return filepath.Join(cfg.Abs(cfg.RunsDir), runfolder.Safe(workflowID))
}

// ClaimedRun is the run whose folder work of workflow own (of type typ)
// may use when it names claimed: its own, or, for an ItemsWorkflow batch
// or a sub-plan's run, its parent's (whose ID own starts with, then a dot).
func ClaimedRun(own, typ, claimed string) (string, error) {
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

// Within checks that path, absolute, lies inside dir (after cleaning;
// symlinks are the tools' business: builtins open through os.Root). A
// relative path from history is never the run folder's.
func Within(dir, path string) error {
	if path == "" {
		return nil
	}
	if _, ok := beneath.Rel(dir, path); !ok || !filepath.IsAbs(path) {
		return caperr.New(caperr.InvalidInput, "%s is outside the run folder %s", path, dir)
	}
	return nil
}

// InRun checks paths against the folders of run id on this worker: its
// own, and the one of runs recorded before runfolder.Name.
func (e *Executor) InRun(id string, paths ...string) error {
	for _, p := range paths {
		if Within(e.RunDir(id), p) != nil && Within(e.LegacyRunDir(id), p) != nil {
			return caperr.New(caperr.InvalidInput, "%s is outside the folder of run %s", p, id)
		}
	}
	return nil
}

// ForeignOutcome names the first step (in id order) whose stored output
// lies outside the folder of run id, and its path ("" when none does).
func (e *Executor) ForeignOutcome(id string, deps map[string]wfapi.StepOutcome) (string, string) {
	for _, dep := range slices.Sorted(maps.Keys(deps)) {
		if e.InRun(id, deps[dep].DataFile) != nil {
			return dep, deps[dep].DataFile
		}
	}
	return "", ""
}

// stepFolder is a step's (or an item's) folder in its run's folder.
func stepFolder(runDir string, step wfapi.StepCall) string {
	index := -1
	if step.Item != nil {
		index = step.Item.Index
	}
	return runfolder.Step(runDir, step.ID, index)
}

// recordsFolder is where the engine keeps a step's (or an item's) records
// in its run's folder (runfolder.Records): out of its tool's reach.
func recordsFolder(runDir string, step wfapi.StepCall) string {
	index := -1
	if step.Item != nil {
		index = step.Item.Index
	}
	return runfolder.Records(runDir, step.ID, index)
}
