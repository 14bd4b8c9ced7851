package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/wfapi"
)

// Host failover (docs/operations.md): a run's steps run on its host; when
// the host is lost, idempotent steps follow the run to another.

// hostLost reports whether an activity failed because no worker of the
// run's host took it in time.
func (s *scheduler) hostLost(err error) bool {
	var timeout *temporal.TimeoutError
	return s.rr.HostQueue != "" && errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// hostSilent reports whether an idempotent step's activity on the run's
// host ended because nothing there heartbeated, through its last attempt.
// A host that is stopped or cut off keeps its open polls: the server hands
// them the step's next attempts, each ending the same way, before a
// schedule-to-start timeout could say the host is lost (the soak saw a
// step's three attempts spent so, issue 41). Such a step follows the run
// as for a lost host, at most maxMoves times; where the host is alive
// after all, the Host activity answers it again and the step runs there.
func (s *scheduler) hostSilent(step wfapi.ResolvedStep, err error, moves int) bool {
	var timeout *temporal.TimeoutError
	return s.rr.HostQueue != "" && step.TaskQueue == "" && step.Idempotent && !s.stopped() && moves < maxMoves &&
		errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT && !s.pastDeadline(time.Second) &&
		versionOf(s.ctx, changeSilentHost) == 1
}

// itemFollows reports whether a for_each item whose activity failed goes
// on on another host (lost or silent, as a step would).
func (s *scheduler) itemFollows(st *stepState, it *itemState, err error) bool {
	if s.stopped() || st.fe.abandoned || !st.step.Idempotent || it.moves >= maxMoves {
		return false
	}
	return (s.hostLost(err) || s.hostSilent(st.step, err, it.moves)) && versionOf(s.ctx, changeItemHosts) == 1
}

// moveHost sends an idempotent step whose host was lost to another host:
// the Host activity, on the shared queue, answers with the host queue of
// whichever worker takes it. Its earlier outputs stored on the lost host
// are re-created by re-running their producers when a consumer misses
// them (recreate).
func (s *scheduler) moveHost(st *stepState) {
	st.env = nil
	s.m.SetReason(st.step.ID, fmt.Sprintf("moving to another host: %s was lost", s.rr.HostQueue))
	s.moving = append(s.moving, st.step.ID)
	s.findHost()
}

// itemRef names one item of a for_each step.
type itemRef struct {
	step  string
	index int
}

// followItemHost runs again an idempotent for_each item whose activity no
// worker of its host took: at once where the run is now when the run
// already left that host, else once the Host activity found another.
func (s *scheduler) followItemHost(st *stepState, index int) {
	it := st.fe.items[index]
	it.status, it.env, it.reason, it.moves = wfapi.StepPending, nil, "", it.moves+1
	ref := itemRef{st.step.ID, index}
	if it.host != s.rr.HostQueue {
		s.requeueItems([]itemRef{ref})
		return
	}
	it.moving = true
	s.movingItems = append(s.movingItems, ref)
	s.findHost()
}

// requeueItems starts pending items again (startItems takes them).
func (s *scheduler) requeueItems(refs []itemRef) {
	for _, r := range refs {
		fe := s.steps[r.step].fe
		fe.items[r.index].moving = false
		fe.next = min(fe.next, r.index)
		if !slices.Contains(s.work, r.step) {
			s.work = insertSorted(s.work, r.step)
		}
	}
}

// endMovingItems ends the items that waited for a new host that never
// came (or a run that stopped meanwhile).
func (s *scheduler) endMovingItems(refs []itemRef, state wfapi.StepState, why string) {
	for _, r := range refs {
		st := s.steps[r.step]
		it := st.fe.items[r.index]
		it.moving = false
		if it.status != wfapi.StepPending {
			continue // ended meanwhile: its step stopped its items
		}
		it.status, it.reason = state, why
		it.env = s.synthEnvelope(st.step.Tool, caperr.TaskTimeout, why)
		if state == wfapi.StepCancelled {
			it.env = s.synthEnvelope(st.step.Tool, caperr.Cancelled, why)
		}
		s.itemEnded(st, it)
	}
}

// findHost asks the shared queue for another host, once at a time, for
// the steps and items waiting to move.
func (s *scheduler) findHost() {
	if s.rehosting {
		return
	}
	s.rehosting = true
	lost := s.rr.HostQueue
	s.inflight++
	// Quick (it names the worker's host queue): a short attempt, so that
	// one handed to a stopped worker's open poll is soon given to another.
	actx := workflow.WithActivityOptions(s.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second, ScheduleToCloseTimeout: 10 * time.Minute, RetryPolicy: localRetry,
		Summary: "find another host: " + lost + " was lost",
	})
	s.sel.AddFuture(workflow.ExecuteActivity(actx, wfapi.HostActivity, s.workflowID), func(f workflow.Future) {
		s.inflight--
		s.rehosting = false
		var next wfapi.HostInfo
		err := f.Get(s.ctx, &next)
		ids, items := s.moving, s.movingItems
		s.moving, s.movingItems = nil, nil
		switch {
		case s.stopped():
			for _, id := range ids {
				st := s.steps[id]
				st.env = s.synthEnvelope(st.step.Tool, caperr.Cancelled, "cancelled: "+s.stopReason())
				s.m.Cancel(id, s.stopReason())
			}
			s.endMovingItems(items, wfapi.StepCancelled, "cancelled: "+s.stopReason())
		case err == nil && next.Queue != "":
			s.movedTo(lost, next, ids)
			s.requeueItems(items)
		default:
			for _, id := range ids {
				st := s.steps[id]
				msg := fmt.Sprintf("%s: its host %s was lost and no other worker answered (%v)", id, lost, err)
				st.env = s.synthEnvelope(st.step.Tool, caperr.TaskTimeout, msg)
				s.fail(st, msg)
			}
			s.endMovingItems(items, wfapi.StepFailed, fmt.Sprintf("its host %s was lost and no other worker answered (%v)", lost, err))
		}
	})
}

// movedTo starts the steps that waited for a new host there.
func (s *scheduler) movedTo(lost string, next wfapi.HostInfo, ids []string) {
	if next.Queue != lost {
		s.lostHosts = append(s.lostHosts, lost)
		workflow.GetLogger(s.ctx).Warn("the run's host was lost; moving on", "lost", lost, "host", next.Queue)
	}
	// The run's folder from here on is the new host's.
	s.rr.HostQueue, s.rr.RunDir, s.rr.SharedStore = next.Queue, next.RunDir, next.SharedStore
	for _, id := range ids {
		st := s.steps[id]
		st.moves++
		if s.rehome(st) {
			continue
		}
		s.launch(st)
	}
}

// followHost runs again a step whose activity no worker of its host took:
// where the run is now when the run already left that host, else on the
// host the Host activity finds.
func (s *scheduler) followHost(st *stepState) {
	if st.host != s.rr.HostQueue {
		// Scheduled on a host the run already left: run it where the
		// run is now (after what it needs from the lost host).
		st.env, st.moves = nil, st.moves+1
		if !s.rehome(st) {
			s.launch(st)
		}
		return
	}
	s.moveHost(st)
}

// rehome runs before a step starts on the run's host after the run lost
// another: the dependencies that ran on a lost host took their files with
// it (an archive a later step unpacks, a report it reads), so the
// idempotent ones run again here first and the step waits for them (their
// own dependencies are checked the same way when they start again). A
// dependency that is not idempotent is not repeated: the step runs, and
// fails on its own if it needed that dependency's files. It reports
// whether the step now waits.
func (s *scheduler) rehome(st *stepState) bool {
	if len(s.lostHosts) == 0 {
		return false
	}
	var again, busy []string
	for _, d := range st.step.Deps {
		p := s.steps[d]
		switch {
		case s.m.State(d) == dag.Succeeded && p.host != s.rr.HostQueue && slices.Contains(s.lostHosts, p.host) &&
			p.step.Idempotent && p.fe == nil && p.child == nil && !p.step.Approval && p.moves < maxMoves:
			again = append(again, d)
		case !s.m.State(d).Terminal():
			// Already running again for a sibling: wait for it too.
			busy = append(busy, d)
		}
	}
	// With a shared store the step reads what they stored from it
	// (docs/artifacts.md); what the store lacks is made again the usual
	// way, when the step reports it lost. Runs recorded before it never
	// reach the version (their hosts did not say).
	if len(again) > 0 && s.rr.SharedStore && versionOf(s.ctx, changeRehomeStore) == 1 {
		again = nil
	}
	// Versioned: runs that lost a host before this existed replay as they ran.
	if len(again)+len(busy) == 0 || versionOf(s.ctx, changeRehomeDeps) == workflow.DefaultVersion {
		return false
	}
	reason := fmt.Sprintf("waiting for %s to run again on this host: the run lost the host that had their files", strings.Join(append(again, busy...), ", "))
	if s.m.State(st.step.ID) == dag.Running {
		s.m.Requeue(st.step.ID, reason)
	} else {
		s.m.SetReason(st.step.ID, reason)
	}
	for _, d := range again {
		p := s.steps[d]
		p.moves++
		p.dataFile, p.dataSHA, p.carried, p.artifacts = "", "", false, nil
		workflow.GetLogger(s.ctx).Warn("running a step again: its host was lost", "step", d, "for", st.step.ID, "lost", p.host)
		s.m.Requeue(d, "run again: its host "+p.host+" was lost")
		s.m.Examine(d)
	}
	return true
}

// maxMoves bounds how often one step follows the run to another host.
const maxMoves = 3

// lostProcesses warns of the servers the run started on hosts it lost:
// nobody could stop them.
func (s *scheduler) lostProcesses() []string {
	out := append([]string(nil), s.carriedWarnings...)
	for _, id := range s.m.IDs() {
		st := s.steps[id]
		if s.m.State(id) != dag.Succeeded || st.step.Capability != "server.start" || !slices.Contains(s.lostHosts, st.host) {
			continue
		}
		pid := ""
		if m, ok := st.env.Data.(map[string]any); ok {
			pid = fmt.Sprint(m["pid"])
		}
		out = append(out, fmt.Sprintf("%s started pid %s on %s, which the run lost: it could not be stopped from here", id, pid, st.host))
	}
	return out
}
