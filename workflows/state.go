package workflows

import (
	"fmt"

	"github.com/capflow/capflow/internal/wfapi"
)

// transitions is the step lifecycle (seed 003's task state machine):
// pending → running → succeeded | failed | cancelled; pending → skipped or
// cancelled; nothing leaves a terminal state.
var transitions = map[string][]string{
	wfapi.StepPending: {wfapi.StepRunning, wfapi.StepSkipped, wfapi.StepCancelled},
	wfapi.StepRunning: {wfapi.StepSucceeded, wfapi.StepFailed, wfapi.StepSkipped, wfapi.StepCancelled},
}

// terminal reports whether a step state is final.
func terminal(s string) bool {
	switch s {
	case wfapi.StepSucceeded, wfapi.StepFailed, wfapi.StepSkipped, wfapi.StepCancelled, wfapi.StepBlocked:
		return true
	}
	return false
}

// ErrInvalidTransition marks a scheduler bug.
type ErrInvalidTransition struct{ Step, From, To string }

func (e ErrInvalidTransition) Error() string {
	return fmt.Sprintf("step %s: invalid transition %s → %s", e.Step, e.From, e.To)
}

// checkTransition validates one move of the lifecycle.
func checkTransition(step, from, to string) error {
	for _, ok := range transitions[from] {
		if ok == to {
			return nil
		}
	}
	return ErrInvalidTransition{step, from, to}
}
