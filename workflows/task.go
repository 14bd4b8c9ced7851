package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// What a workflow task may record: local steps' markers and inline
// batches' results are written when the task completes, so past a budget
// the driver yields (flushLocal) and the history's growth between segment
// checks stays bounded. The ways count what they recorded in the task
// (newTask clears it when the history grew).

// LocalFlush is how many local steps may end within one workflow task:
// their results are recorded as markers when the task completes, so past
// it the scheduler yields (a 1 ms timer) to keep each task's completion,
// and the history's growth between segment checks, bounded.
const LocalFlush = wfapi.DefaultLocalFlush

// flushLocal yields when the local steps that ended in this workflow task
// reached LocalFlush, or their inline results the run's InlineFlushBytes.
// A new workflow task shows as a longer history: its markers are in.
func (s *dispatcher) flushLocal() {
	if s.flushDue() && s.ctx.Err() == nil {
		if s.leave != nil {
			s.leave()
		}
		_ = workflow.Sleep(s.ctx, time.Millisecond)
		s.seenLen = -1 // a new task, even where the history length stands still (tests)
		s.taskBegan()
	}
}

// taskBegan clears what the dispatcher counts per workflow task when a new
// task began (the history grew: the last one's markers are in).
func (s *dispatcher) taskBegan() {
	if l := workflow.GetInfo(s.ctx).GetCurrentHistoryLength(); l != s.seenLen {
		s.seenLen = l
		s.ways.newTask()
	}
}

// flushDue reports whether this workflow task has recorded what one task
// may: flushLocal then yields.
func (s *dispatcher) flushDue() bool {
	s.taskBegan()
	return s.ways.local.done >= s.p.localFlush || s.inlineDue()
}

// inlineDue reports whether this task's inline steps used its budget
// (inlineWay.due).
func (s *dispatcher) inlineDue() bool { return s.ways.inline.due(s) }

// awaitTool has sel deliver a unit's future f to done, or keeps an inline
// step's for settle (inlineWay.await).
func (s *dispatcher) awaitTool(sel workflow.Selector, f workflow.Future, path *string, done func(workflow.Future)) {
	s.ways.inline.await(s, sel, f, path, done)
}

// settle starts the queued inline steps' batch and hands on the results
// there are (inlineWay.settle); it reports whether any was.
func (s *dispatcher) settle(sel workflow.Selector) bool { return s.ways.inline.settle(s, sel) }

// historyLength is the history's length counting the markers of local
// and inline steps that ended in this workflow task (not in it yet).
func (s *dispatcher) historyLength() int {
	return workflow.GetInfo(s.ctx).GetCurrentHistoryLength() + s.ways.local.done + s.ways.inline.done
}

// segmentFull reports whether the history reached the run's recorded
// segment length or size (docs/limits.md). An inline step counts as an
// event, as a local step's marker does: a batch is one marker, but every
// step it holds goes into the segment's checkpoint.
func (s *scheduler) segmentFull() bool {
	if s.p.segmentEvents > 0 && s.historyLength()+s.ways.inline.steps >= s.p.segmentEvents {
		return true
	}
	// Bytes this segment added: its start (reloaded pages, the carry) may
	// already be megabytes, and a segment must make progress.
	return s.p.segmentBytes > 0 && workflow.GetInfo(s.ctx).GetCurrentHistorySize()-s.baseSize >= s.p.segmentBytes
}
