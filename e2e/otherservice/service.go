// Package otherservice is a service outside capflow steering a run the way
// any Go service would: through the client package alone (its imports are
// checked: no capflow internal package). The end-to-end tests run it
// against a real Temporal server and worker.
package otherservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/capflow/capflow/client"
)

// Outcome is what the service saw.
type Outcome struct {
	// Refused is the run's answer to a decision for a step that does not
	// wait.
	Refused string
	// First answers the approval; Again is the run's refusal of the same
	// approval sent once more (it says what was decided).
	First  *client.ControlAnswer
	Again  string
	Result *client.Result
}

// ApproveAndWait starts plan, waits for its step gate to wait for an
// approval, approves it (and once more, as a second operator would), and
// waits for the result.
func ApproveAndWait(ctx context.Context, c *client.Client, plan any) (*Outcome, error) {
	run, err := c.StartPlan(ctx, "", plan, nil)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, run, "gate", client.StepWaiting); err != nil {
		return nil, err
	}
	var out Outcome
	_, err = run.Decide(ctx, "", client.DecideRequest{Step: "sum", Action: client.ActionApprove, By: "svc"})
	var refused *client.Refused
	if !errors.As(err, &refused) {
		return nil, fmt.Errorf("a decision for a step that does not wait: %v", err)
	}
	out.Refused = refused.Reason
	approve := client.DecideRequest{Step: "gate", Action: client.ActionApprove, By: "svc"}
	if out.First, err = run.DecideOnce(ctx, approve); err != nil {
		return nil, err
	}
	if _, err = run.DecideOnce(ctx, approve); !errors.As(err, &refused) {
		return nil, fmt.Errorf("an approval sent twice: %v", err)
	}
	out.Again = refused.Reason
	out.Result, err = run.Wait(ctx)
	return &out, err
}

func waitFor(ctx context.Context, run *client.Run, step string, state client.StepState) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if p, err := run.Progress(ctx); err == nil {
			for _, s := range p.Steps {
				if s.ID == step && s.Status == state {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("step %s did not reach %s within a minute", step, state)
}
