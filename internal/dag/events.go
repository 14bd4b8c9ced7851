package dag

import (
	"sort"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
)

// The events the driver reports. Each moves one step, then lets the
// machine react: examine the dependents of a step that ended (queue the
// ones whose join is met, skip the ones whose join no longer can be) and
// apply the failure policy after a failure (stop the run, halting what
// runs and skipping what has not started).

// Start: the step's activity (or child, or items) started; from pending,
// or from waiting when an operator retried it.
func (m *Machine) Start(id string) { m.move(m.nodes[id], Running, "", "") }

// Wait: the step waits for a person (an approval, or a decision on its
// failure).
func (m *Machine) Wait(id, reason string) { m.move(m.nodes[id], Waiting, reason, "") }

// Requeue sends a running or succeeded step back to pending: recovery (a
// producer re-creating a lost output, a consumer waiting for it, a step
// following the run to another host). Its dependents are not examined:
// it has not ended.
func (m *Machine) Requeue(id, reason string) { m.move(m.nodes[id], Pending, reason, "") }

// Succeed: the step succeeded.
func (m *Machine) Succeed(id string) {
	m.move(m.nodes[id], Succeeded, "", "")
	m.Examine(m.dependents[id]...)
}

// Fail: the step failed with code (cause: the code behind a summarising
// one). Under on_failure: skip it is skipped instead, and absorbed.
func (m *Machine) Fail(id string, code, cause caperr.Code, why string) {
	n := m.nodes[id]
	n.code, n.cause = code, cause
	if n.step.OnFailure == plan.OnFailureSkip {
		m.move(n, Skipped, "failed ("+why+"); on_failure: skip", "")
	} else {
		m.move(n, Failed, why, "")
	}
	m.checkStop()
	m.Examine(m.dependents[id]...)
}

// End ends a step in a given state as it is (no on_failure): a wait
// answered or timed out, a condition that could not be evaluated.
func (m *Machine) End(id string, to State, code, cause caperr.Code, reason string) {
	n := m.nodes[id]
	if to == Failed {
		n.code, n.cause = code, cause
	}
	m.move(n, to, reason, "")
	m.checkStop()
	m.Examine(m.dependents[id]...)
}

// Decision is an operator's answer to a waiting step (docs/run-control.md).
type Decision string

// The decisions.
const (
	Approve Decision = "approve"
	Reject  Decision = "reject"
	Retry   Decision = "retry"
	Skip    Decision = "skip"
	FailIt  Decision = "fail"
)

// decisionEnds is where a decision leaves a waiting step (retry: nowhere,
// its tool runs again).
var decisionEnds = map[Decision]State{Approve: Succeeded, Reject: Failed, Skip: Skipped, FailIt: Failed}

// Decide carries out a decision on a waiting step: it ends as the table
// says (a skipped one counts as decided: absorbed, it fails no run), or, again
// true, its tool runs again (the driver starts it).
func (m *Machine) Decide(id string, d Decision, code, cause caperr.Code, reason string) (again bool) {
	to, ok := decisionEnds[d]
	if !ok {
		return true
	}
	if d == Skip {
		m.MarkDecided(id)
	}
	m.End(id, to, code, cause, reason)
	return false
}

// Cancel: the step was cancelled (the run stopped while it ran).
func (m *Machine) Cancel(id, reason string) {
	m.move(m.nodes[id], Cancelled, reason, "")
	m.Examine(m.dependents[id]...)
}

// SkipWhenFalse: the step's condition is false. It is skipped, never a
// failure, and left out of its dependents' joins.
func (m *Machine) SkipWhenFalse(id string) {
	n := m.nodes[id]
	if n.state != Pending && n.state != Running {
		return
	}
	n.whenFalse = true
	m.move(n, Skipped, "when: false", "")
	m.Examine(m.dependents[id]...)
}

// NextReady takes the first ready step (in id order) that is still
// pending.
func (m *Machine) NextReady() (string, bool) {
	for len(m.ready) > 0 {
		id := m.ready[0]
		m.ready = m.ready[1:]
		if m.nodes[id].state == Pending {
			return id, true
		}
	}
	return "", false
}

// ReadyCount is how many steps are queued to start.
func (m *Machine) ReadyCount() int { return len(m.ready) }

// Examine decides pending steps, and in turn the dependents of those it
// skips: a step whose join can no longer be met is skipped (its reason
// names the dependencies that did not succeed); one whose dependencies all
// ended with the join met is queued.
func (m *Machine) Examine(ids ...string) {
	work := append([]string(nil), ids...)
	var id string
	for len(work) > 0 {
		id, work = work[0], work[1:]
		n := m.nodes[id]
		if n == nil || n.state != Pending || m.stopped {
			continue
		}
		succ, bad, open := m.counts(n)
		need := m.required(n)
		switch {
		case succ+open < need:
			var code caperr.Code
			if p := n.step.Join.Policy; p == plan.JoinAny || p == plan.JoinQuorum {
				code = caperr.QuorumNotMet
			}
			m.move(n, Skipped, m.skipReason(n, need), code)
			m.checkStop()
			work = append(work, m.dependents[id]...)
		case open == 0 && succ >= need:
			if p := n.step.Join.Policy; p == plan.JoinAny || p == plan.JoinQuorum {
				n.joinNote = joinNote(p, succ, succ+bad)
			}
			m.enqueue(id)
		}
	}
}

func (m *Machine) enqueue(id string) {
	i := sort.SearchStrings(m.ready, id)
	if i < len(m.ready) && m.ready[i] == id {
		return
	}
	m.ready = append(m.ready, "")
	copy(m.ready[i+1:], m.ready[i:])
	m.ready[i] = id
}

// Stop stops the run: running and waiting steps are halted (a waiting one
// is cancelled), pending ones skipped (cancelled when the run was
// cancelled), in id order. Only the first stop counts.
func (m *Machine) Stop(reason string) {
	if m.stopped {
		return
	}
	m.stopped, m.stopReason = true, reason
	for _, id := range m.ids {
		n := m.nodes[id]
		switch n.state {
		case Waiting:
			m.fx.Halt(id, Waiting)
			m.move(n, Cancelled, "stopped while waiting: "+reason, "")
		case Running:
			m.fx.Halt(id, Running)
		case Pending:
			to := Skipped
			if m.cancelled {
				to = Cancelled
			}
			m.move(n, to, "not started: "+reason, "")
		}
	}
}

// CancelRun stops the run because it was cancelled.
func (m *Machine) CancelRun(reason string) {
	m.cancelled = true
	m.Stop(reason)
}
