package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/dag"
)

// CancelGrace is how long a halted step's activity has to confirm its
// cancellation. A live worker does within seconds (heartbeats every second
// carry the request, then the tool's stop grace); a worker that died with
// the step never will, and without a heartbeat timeout the server would
// hold the activity until its start-to-close timeout (10 minutes by
// default): a cancelled run would wait that long to end.
const CancelGrace = 30 * time.Second

// confirmCancel gives a halted activity step CancelGrace to confirm;
// past it the step is cancelled without its worker's word. Version 2
// waits only for a tool's activity in flight (version 1 also timed a
// step between its evaluation and its start, or a sub-plan's child, whose
// ends the timer did not see).
func (s *scheduler) confirmCancel(st *stepState) {
	v := versionOf(s.ctx, changeCancelGrace)
	switch {
	case v == workflow.DefaultVersion:
		return
	case v == 1 && st.child != nil:
		return
	case v >= 2 && (!st.toolActive || st.step.Plan != ""):
		return
	}
	// Disconnected: a cancelled run's own context can start no timer.
	dctx, _ := workflow.NewDisconnectedContext(s.ctx)
	tctx, cancel := workflow.WithCancel(dctx)
	st.graceCancel = cancel
	id := st.step.ID
	s.sel.AddFuture(workflow.NewTimer(tctx, CancelGrace), func(f workflow.Future) {
		if f.Get(tctx, nil) != nil || st.graceCancel == nil {
			return // confirmed in time (the timer was cancelled)
		}
		if v >= 2 && (!st.toolActive || s.m.State(id) != dag.Running) {
			return
		}
		st.graceCancel, st.abandoned = nil, true
		s.inflight--
		why := fmt.Sprintf("%s; its worker did not confirm the cancellation within %s (it may have stopped with the step)", s.stopReason(), CancelGrace)
		st.env = s.synthEnvelope(st.step.Tool, caperr.Cancelled, "cancelled: "+why)
		s.m.Cancel(id, why)
	})
}

// confirmed ends a step's wait for its cancellation; false when the step
// was already given up on (its activity's late answer is ignored).
func (s *scheduler) confirmed(st *stepState) bool {
	if st.abandoned {
		return false
	}
	if st.graceCancel != nil {
		st.graceCancel()
		st.graceCancel = nil
	}
	st.toolActive = false
	return true
}
