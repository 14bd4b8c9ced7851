package workflows

import (
	"fmt"

	"github.com/capflow/capflow/internal/wfapi"
)

// transitions is the step lifecycle (docs/workflow.md):
// pending → running → succeeded | failed | cancelled; pending → skipped or
// cancelled; nothing leaves a terminal state.
//
// Two moves exist only for recovery (docs/workflow.md, stored outputs): a succeeded
// idempotent step goes back to pending to re-create a stored output a
// consumer found lost, and that consumer goes from running back to
// pending until it is re-created.
//
// A step waits for a person (docs/run-control.md): a flow.approve step from
// pending, a failed step under on_failure: ask from running; a decision
// or the wait's timeout ends the wait.
var transitions = map[wfapi.StepState][]wfapi.StepState{
	wfapi.StepPending:   {wfapi.StepRunning, wfapi.StepSkipped, wfapi.StepCancelled, wfapi.StepWaiting},
	wfapi.StepRunning:   {wfapi.StepSucceeded, wfapi.StepFailed, wfapi.StepSkipped, wfapi.StepCancelled, wfapi.StepPending, wfapi.StepWaiting},
	wfapi.StepSucceeded: {wfapi.StepPending},
	wfapi.StepWaiting:   {wfapi.StepRunning, wfapi.StepSucceeded, wfapi.StepFailed, wfapi.StepSkipped, wfapi.StepCancelled},
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
