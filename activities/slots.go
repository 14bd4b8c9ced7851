package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// Slots keeps tools' limits with a LimitWorkflow per tool and key value
// (workflows/limit.go) on the worker's task queue: step.Slots.
type Slots struct {
	Client client.Client
	Queue  string
}

// Take asks the limit's workflow for a slot (starting it when none runs)
// and waits for it; while the slot is held its lease is renewed, and the
// function returned gives it back. A cancelled wait tells the workflow, so
// the step takes nothing.
func (s *Slots) Take(ctx context.Context, req step.SlotRequest) (func(), error) {
	id := wfapi.LimitWorkflowID(req.Scope, req.Key)
	lr := wfapi.LimitRequest{Holder: req.Holder, Concurrency: req.Limits.Concurrency, Interval: req.Limits.Interval(), Lease: req.Lease}
	label := req.Scope
	if k := req.Limits.KeyInput(); k != "" {
		label += " per " + k
	}
	for {
		err := s.acquire(ctx, id, label, lr)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			s.signal(id, wfapi.LimitReleaseSignal, req.Holder)
			return nil, ctx.Err()
		}
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == "Released" {
			return nil, err
		}
		// The limit's workflow continued as new or ended while this
		// waited: ask its next run.
		select {
		case <-ctx.Done():
			s.signal(id, wfapi.LimitReleaseSignal, req.Holder)
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(req.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.signal(id, wfapi.LimitRenewSignal, lr)
			}
		}
	}()
	return func() { close(done); s.signal(id, wfapi.LimitReleaseSignal, req.Holder) }, nil
}

func (s *Slots) acquire(ctx context.Context, id, label string, lr wfapi.LimitRequest) error {
	start := s.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: id, TaskQueue: s.Queue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, StaticSummary: "limit: " + label},
		wfapi.LimitWorkflowType, wfapi.LimitState{Label: label})
	h, err := s.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: wfapi.LimitAcquireUpdate, Args: []any{lr}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	if err != nil {
		return err
	}
	return h.Get(ctx, nil)
}

// signal tells the limit's workflow, whatever the attempt's context: a
// release must reach it after a cancellation too. One that does not (the
// server unreachable) leaves the slot to its lease.
func (s *Slots) signal(id, name string, arg any) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Client.SignalWorkflow(ctx, id, "", name, arg)
}
