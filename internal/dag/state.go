// Package dag is the run's state machine, free of Temporal: given a plan's
// graph and what happened to its steps (started, succeeded, failed,
// skipped, waiting, decided, re-queued, stopped), it keeps every step's
// state and says what comes next: which steps are ready to start, which
// are skipped and why, which running or waiting steps a stop must halt, and
// how the run ends. The workflow (workflows/) drives it and turns its
// answers into activities, timers and child workflows (docs/architecture.md).
package dag

import "fmt"

// State is a step's place in its lifecycle (docs/workflow.md).
type State uint8

// The states. Their names are the wire's (client.StepState).
const (
	Pending State = iota
	Running
	Waiting
	Succeeded
	Failed
	Skipped
	Cancelled
	numStates
)

var stateNames = [numStates]string{"pending", "running", "waiting", "succeeded", "failed", "skipped", "cancelled"}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// ParseState reads a state's name.
func ParseState(name string) (State, error) {
	for i, n := range stateNames {
		if n == name {
			return State(i), nil
		}
	}
	return 0, fmt.Errorf("unknown step state %q", name)
}

// Terminal reports whether nothing but recovery leaves the state.
func (s State) Terminal() bool { return s >= Succeeded }

// Open reports whether the step has not ended (it may still succeed).
func (s State) Open() bool { return s < Succeeded }

// transitions is the lifecycle: pending → running → succeeded | failed |
// cancelled; pending → skipped or cancelled; nothing leaves a terminal
// state, except two recovery moves (a succeeded step goes back to pending
// to re-create a lost output, and a running consumer waits for it as
// pending). A step waits for a person from pending (an approval) or
// running (a failure under on_failure: ask); a decision or the wait's
// timeout ends the wait.
var transitions = [numStates][]State{
	Pending:   {Running, Skipped, Cancelled, Waiting},
	Running:   {Succeeded, Failed, Skipped, Cancelled, Pending, Waiting},
	Succeeded: {Pending},
	Waiting:   {Running, Succeeded, Failed, Skipped, Cancelled},
}

// ErrInvalidTransition is a move the lifecycle does not allow: a bug in
// the driver, surfaced as the run's internal error.
type ErrInvalidTransition struct {
	Step     string
	From, To State
}

func (e ErrInvalidTransition) Error() string {
	return fmt.Sprintf("step %s: invalid transition %s → %s", e.Step, e.From, e.To)
}

// CheckTransition validates one move of the lifecycle.
func CheckTransition(step string, from, to State) error {
	if from < numStates {
		for _, ok := range transitions[from] {
			if ok == to {
				return nil
			}
		}
	}
	return ErrInvalidTransition{step, from, to}
}

// Verdict is how a run ends.
type Verdict uint8

// Verdicts; their names are the wire's run statuses.
const (
	Passed Verdict = iota
	FailedRun
	CancelledRun
)

func (v Verdict) String() string {
	switch v {
	case Passed:
		return "passed"
	case FailedRun:
		return "failed"
	case CancelledRun:
		return "cancelled"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}
