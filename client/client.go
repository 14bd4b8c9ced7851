// Package client starts and steers capflow runs from Go services, over any
// Temporal client: start a plan (an object, a file in the workers' project,
// or request text), wait for its result, read its progress, and send the
// run-control updates (docs/workflow.md, docs/run-control.md). Its API
// uses only its own types (types.go, result.go): importing it brings no
// registry, CEL or JSON Schema code.
package client

import (
	"context"
	"errors"
	"fmt"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Client starts runs on a task queue.
type Client struct {
	tc        sdkclient.Client
	taskQueue string
}

// New wraps a Temporal client; taskQueue "" means DefaultTaskQueue.
func New(tc sdkclient.Client, taskQueue string) *Client {
	if taskQueue == "" {
		taskQueue = DefaultTaskQueue
	}
	return &Client{tc: tc, taskQueue: taskQueue}
}

// Run is one started (or found) run.
type Run struct {
	c  *Client
	ID string
}

// Start starts a run with the given input under workflow ID id ("" lets
// Temporal choose).
func (c *Client) Start(ctx context.Context, id string, in Input) (*Run, error) {
	r, err := c.tc.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: c.taskQueue}, WorkflowType, in)
	if err != nil {
		return nil, err
	}
	return &Run{c: c, ID: r.GetID()}, nil
}

// StartPlan starts a plan given as an object (what a plan file parses to).
func (c *Client) StartPlan(ctx context.Context, id string, plan any, inputs map[string]any) (*Run, error) {
	return c.Start(ctx, id, Input{Plan: plan, Inputs: inputs})
}

// StartPlanFile starts a plan file inside the workers' project (a path
// from its root): how plans too large for a workflow input travel.
func (c *Client) StartPlanFile(ctx context.Context, id, path string, inputs map[string]any) (*Run, error) {
	return c.Start(ctx, id, Input{PlanFile: path, Inputs: inputs})
}

// StartRequest starts a run from request text, routed by the workers.
func (c *Client) StartRequest(ctx context.Context, id, request string, inputs map[string]any) (*Run, error) {
	return c.Start(ctx, id, Input{Request: request, Inputs: inputs})
}

// Get finds a run by workflow ID.
func (c *Client) Get(id string) *Run { return &Run{c: c, ID: id} }

// Wait waits for the run's result (following continue-as-new).
func (r *Run) Wait(ctx context.Context) (*Result, error) {
	var res Result
	if err := r.c.tc.GetWorkflow(ctx, r.ID, "").Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Progress is the run's state now (the progress query).
func (r *Run) Progress(ctx context.Context) (*Result, error) {
	v, err := r.c.tc.QueryWorkflow(ctx, r.ID, "", ProgressQuery)
	if err != nil {
		return nil, err
	}
	var res Result
	if err := v.Get(&res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Pause stops the run from starting steps until Resume.
func (r *Run) Pause(ctx context.Context, by string) (*ControlAnswer, error) {
	return r.update(ctx, UpdatePause, "", ControlRequest{By: by})
}

// Resume resumes a paused run.
func (r *Run) Resume(ctx context.Context, by string) (*ControlAnswer, error) {
	return r.update(ctx, UpdateResume, "", ControlRequest{By: by})
}

// Decide answers a waiting step (approve, reject, retry, skip, fail).
// updateID makes a repeated call one decision ("": a new one each time).
func (r *Run) Decide(ctx context.Context, updateID string, req DecideRequest) (*ControlAnswer, error) {
	return r.update(ctx, UpdateDecide, updateID, req)
}

// DecideOnce answers the wait the step is in now, under the update ID
// DecisionID names: the same answer sent again (a retried request, a
// second operator) is the same decision, never a second one. A step that
// is not waiting is sent as is, for the run to refuse with its reason.
func (r *Run) DecideOnce(ctx context.Context, req DecideRequest) (*ControlAnswer, error) {
	updateID := ""
	if p, err := r.Progress(ctx); err == nil {
		updateID = p.DecisionUpdateID(req)
	}
	return r.Decide(ctx, updateID, req)
}

// Cancel cancels the run: its tools are stopped, its report still written.
func (r *Run) Cancel(ctx context.Context) error { return r.c.tc.CancelWorkflow(ctx, r.ID, "") }

// Refused is a run-control request the run's validator refused: nothing
// changed.
type Refused struct{ Reason string }

func (e *Refused) Error() string { return "refused: " + e.Reason }

func (r *Run) update(ctx context.Context, name, updateID string, arg any) (*ControlAnswer, error) {
	h, err := r.c.tc.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
		WorkflowID: r.ID, UpdateName: name, UpdateID: updateID, Args: []any{arg}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
	})
	var ans ControlAnswer
	if err == nil {
		err = h.Get(ctx, &ans)
	}
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			return nil, &Refused{Reason: app.Message()}
		}
		return nil, fmt.Errorf("%s %s: %w", name, r.ID, err)
	}
	return &ans, nil
}
