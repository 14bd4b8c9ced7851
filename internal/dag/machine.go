package dag

import (
	"sort"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
)

// Step is what the machine knows of a plan step: its place in the graph
// and the rules that decide its joins and failures.
type Step struct {
	ID        string
	Deps      []string
	Join      plan.Join
	OnFailure string // plan.OnFailureSkip, plan.OnFailureAsk or ""
	Critical  bool
}

// Transition is one move of a step, as the driver hears of it.
type Transition struct {
	ID       string
	From, To State
	Reason   string
	// Code is set when the machine itself ended the step with an error:
	// QUORUM_NOT_MET for an any/quorum join that can no longer be met.
	Code caperr.Code
}

// Effects is how the machine tells its driver what happened. Calls come in
// the order the machine acts, which is the order the driver must act in
// (a workflow's commands must come in the same order on every replay).
type Effects interface {
	// Moved follows every transition.
	Moved(Transition)
	// Halt asks the driver to stop a running step (cancel its activity,
	// child or items) or a waiting one (cancel its timer) because the run
	// stopped; a waiting step is then moved to cancelled by the machine.
	Halt(id string, was State)
}

type node struct {
	step      Step
	state     State
	reason    string
	whenFalse bool // skipped by its own condition: left out of joins
	decided   bool // skipped by an operator's decision: absorbed
	// code and cause: the failure's error code and, for one that
	// summarises (RETRY_EXHAUSTED), the last attempt's.
	code, cause caperr.Code
	joinNote    string
}

// Machine is one run's DAG state. It is deterministic: it iterates only
// sorted ids and never reads a clock.
type Machine struct {
	policy     string
	ids        []string // sorted
	nodes      map[string]*node
	dependents map[string][]string
	count      [numStates]int
	ready      []string // sorted: dependencies done, join met
	stopped    bool
	stopReason string
	cancelled  bool
	err        error
	fx         Effects
}

// New builds the machine of a plan's steps under a failure policy
// (plan.FailFast when empty). Every step starts pending; call Examine to
// find the first ready ones.
func New(steps []Step, failurePolicy string, fx Effects) *Machine {
	if failurePolicy == "" {
		failurePolicy = plan.FailFast
	}
	m := &Machine{policy: failurePolicy, nodes: make(map[string]*node, len(steps)), dependents: map[string][]string{}, fx: fx}
	for _, st := range steps {
		m.nodes[st.ID] = &node{step: st}
		m.ids = append(m.ids, st.ID)
		m.count[Pending]++
		for _, d := range st.Deps {
			m.dependents[d] = append(m.dependents[d], st.ID)
		}
	}
	sort.Strings(m.ids)
	for _, id := range m.ids {
		sort.Strings(m.dependents[id])
	}
	return m
}

// IDs are the steps' ids, sorted.
func (m *Machine) IDs() []string { return m.ids }

// Dependents are the steps that depend on id, sorted.
func (m *Machine) Dependents(id string) []string { return m.dependents[id] }

// State is a step's state (Pending for an unknown id).
func (m *Machine) State(id string) State {
	if n := m.nodes[id]; n != nil {
		return n.state
	}
	return Pending
}

// Reason is why a step is where it is ("" for most).
func (m *Machine) Reason(id string) string { return m.nodes[id].reason }

// SetReason replaces a step's reason without moving it.
func (m *Machine) SetReason(id, reason string) { m.nodes[id].reason = reason }

// WhenFalse reports whether a step was skipped by its own condition.
func (m *Machine) WhenFalse(id string) bool { return m.nodes[id].whenFalse }

// Decided reports whether an operator skipped the step.
func (m *Machine) Decided(id string) bool { return m.nodes[id].decided }

// Code is a failed step's error code and the cause behind it.
func (m *Machine) Code(id string) (code, cause caperr.Code) {
	n := m.nodes[id]
	return n.code, n.cause
}

// JoinNote says how an any/quorum join was met.
func (m *Machine) JoinNote(id string) string { return m.nodes[id].joinNote }

// Count is how many steps are in a state.
func (m *Machine) Count(s State) int { return m.count[s] }

// Stopped reports whether the run stopped, and why.
func (m *Machine) Stopped() (bool, string) { return m.stopped, m.stopReason }

// Cancelled reports whether the run was cancelled.
func (m *Machine) Cancelled() bool { return m.cancelled }

// Err is the first invalid transition the driver asked for (a bug).
func (m *Machine) Err() error { return m.err }

// move makes one transition; it reports false (and keeps the error) for
// one the lifecycle does not allow.
func (m *Machine) move(n *node, to State, reason string, code caperr.Code) bool {
	if err := CheckTransition(n.step.ID, n.state, to); err != nil {
		if m.err == nil {
			m.err = err
		}
		return false
	}
	from := n.state
	m.count[from]--
	m.count[to]++
	n.state = to
	// A wait's reason ("waiting for approval: ...") ends with the wait.
	if reason != "" || from == Waiting {
		n.reason = reason
	}
	m.fx.Moved(Transition{ID: n.step.ID, From: from, To: to, Reason: reason, Code: code})
	return true
}

// Restore puts a step in the state an earlier segment of the run left it
// in (no effects: the driver restores its own side).
func (m *Machine) Restore(id string, s State, whenFalse bool, reason string, code caperr.Code) {
	n := m.nodes[id]
	if n == nil || s == Pending {
		return
	}
	m.count[n.state]--
	m.count[s]++
	n.state, n.whenFalse, n.reason = s, whenFalse, reason
	if code != "" {
		n.code = code
	}
}

// MarkDecided records that an operator's decision skipped the step.
func (m *Machine) MarkDecided(id string) { m.nodes[id].decided = true }
