package workflows

import (
	"fmt"

	"github.com/capflow/capflow/internal/wfapi"
)

// transitions is the step lifecycle (seed 003's task state machine):
// pending → running → succeeded | failed | cancelled; pending → skipped or
// cancelled; nothing leaves a terminal state.
var transitions = map[wfapi.StepState][]wfapi.StepState{
	wfapi.StepPending: {wfapi.StepRunning, wfapi.StepSkipped, wfapi.StepCancelled},
	wfapi.StepRunning: {wfapi.StepSucceeded, wfapi.StepFailed, wfapi.StepSkipped, wfapi.StepCancelled},
}


// ErrInvalidTransition marks a scheduler bug.
type ErrInvalidTransition struct {
	Step     string
	From, To wfapi.StepState
}

func (e ErrInvalidTransition) Error() string {
	return fmt.Sprintf("step %s: invalid transition %s → %s", e.Step, e.From, e.To)
}

// checkTransition validates one move of the lifecycle.
func checkTransition(step string, from, to wfapi.StepState) error {
	for _, ok := range transitions[from] {
		if ok == to {
			return nil
		}
	}
	return ErrInvalidTransition{step, from, to}
}
