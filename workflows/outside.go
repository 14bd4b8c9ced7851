package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/wfapi"
)

// A run begun at baseline 2 starts its max_run_seconds timer and upserts
// its running status only once it may wait outside its workflow task. Its
// local activities run beside the task, which completes only when none is
// left: a run whose steps all end in them (the fast path) records neither,
// only its final status. A local activity is clamped to the deadline
// (withinDeadline) and the loop checks it after each one (pastDeadline),
// so the timer is needed only where the run waits for the server: an
// activity, a child run, a timer, an operator.

// startLazily has the run wait to go outside (baseline 2).
func (s *scheduler) startLazily() {
	s.lazy, s.awaiting = true, map[*string]struct{}{}
	// A local attempt that goes on as a regular activity does so in its
	// own coroutine while the loop waits: it wakes the loop, which goes
	// outside before the task completes. So does a task flushing its
	// markers (flushLocal): the run then spans tasks.
	s.leave = func() {
		s.leaving = true
		s.wakeUp()
	}
}

// awaitTool is the dispatcher's, keeping the unit's path among the tool
// waits in flight until its driver has it, while the run is inside.
func (s *scheduler) awaitTool(sel workflow.Selector, f workflow.Future, path *string, done func(workflow.Future)) {
	if s.lazy && !s.outside {
		s.awaiting[path] = struct{}{}
		inner := done
		done = func(f workflow.Future) {
			delete(s.awaiting, path)
			inner(f)
		}
	}
	s.dispatcher.awaitTool(sel, f, path, done)
}

// goOutside, before the loop blocks, upserts the run's status and starts
// its deadline timer once something it waits for is outside the task.
func (s *scheduler) goOutside() {
	if !s.lazy || s.outside || !s.waitsOutside() {
		return
	}
	s.outside, s.awaiting, s.leave = true, nil, nil
	s.upsert(s.res.Status)
	s.stopDeadline = s.startDeadline()
}

// waitsOutside reports whether the run may wait outside its workflow
// task: it waits for something, and a unit left the task (leaving), an
// operator may be waited for, or something in flight is not a tool's
// local activity (a decision, a child run, a host move, a cancellation's
// grace, a regular attempt).
func (s *scheduler) waitsOutside() bool {
	if s.idle() {
		// Nothing to wait for: the run ends (a yield after its last step
		// does not make it go outside).
		return false
	}
	if s.leaving || s.paused || s.m.Count(dag.Waiting) > 0 || s.inflight > len(s.awaiting) {
		return true
	}
	// Whether any is outside, not which: the order does not matter.
	//workflowcheck:ignore
	for p := range s.awaiting {
		if !localPath(*p) {
			return true
		}
	}
	return false
}

// idle reports whether the run waits for nothing: no step or item runs,
// none waits for an operator, and it is not paused.
func (s *scheduler) idle() bool {
	return s.inflight == 0 && s.m.Count(dag.Waiting) == 0 && !s.paused
}

// localPath reports whether a unit on path waits for (or got) a local
// activity's result within the task.
func localPath(path string) bool {
	switch path {
	case PathLocal, PathInline, pathQueued, pathBatched:
		return true
	}
	return false
}

// endStatus upserts the status a run ends with where the run carries
// another (from its start: package client's runs start running), as one
// that ends before its steps run does (refused, unresolved), or one whose
// worker did not register the attribute itself (baseline 2).
func endStatus(ctx workflow.Context, status wfapi.RunStatus) {
	cur, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(statusKey)
	if ok && cur != string(status) && versionOf(ctx, changeBaseline2) >= 1 {
		_ = workflow.UpsertTypedSearchAttributes(ctx, statusKey.ValueSet(string(status)))
	}
}

// childAttrs are the search attributes a sub-plan's child run starts with
// in a lazy run: its status, running, as package client starts runs (the
// child upserts it only once it goes outside).
func (s *scheduler) childAttrs() temporal.SearchAttributes {
	if !s.lazy || !s.rr.SearchAttributes {
		return temporal.SearchAttributes{}
	}
	return temporal.NewSearchAttributes(statusKey.ValueSet(string(wfapi.StatusRunning)))
}
