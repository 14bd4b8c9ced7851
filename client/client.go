// Package client starts and steers capflow runs from Go services, over any
// Temporal client: start a plan (an object, a file in the workers' project,
// or request text), wait for its result, read its progress, send the
// run-control updates (docs/workflow.md, docs/run-control.md), list runs
// and schedule plans. Its types are package wire's, re-exported (wire.go):
// importing it brings no registry, CEL or JSON Schema code. The capflow CLI
// reaches Temporal through it.
package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Client starts runs on a task queue.
type Client struct {
	tc        sdkclient.Client
	taskQueue string
	dc        converter.DataConverter
	fc        converter.FailureConverter
	// bareUntil: until then (Unix ns), the namespace is taken not to
	// define CapflowStatus (withStartAttrs).
	bareUntil atomic.Int64
}

// Option sets an optional part of a Client.
type Option func(*Client)

// WithConverters names the data and failure converters the Temporal client
// was dialed with (payload encryption, say): the Client reads raw payloads
// with them (a run's first input, heartbeats, schedule memos). Default: the
// SDK's.
func WithConverters(dc converter.DataConverter, fc converter.FailureConverter) Option {
	return func(c *Client) { c.dc, c.fc = dc, fc }
}

// New wraps a Temporal client; taskQueue "" means DefaultTaskQueue.
func New(tc sdkclient.Client, taskQueue string, opts ...Option) *Client {
	if taskQueue == "" {
		taskQueue = DefaultTaskQueue
	}
	c := &Client{tc: tc, taskQueue: taskQueue, dc: converter.GetDefaultDataConverter(), fc: temporal.GetDefaultFailureConverter()}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Close closes the Temporal client.
func (c *Client) Close() { c.tc.Close() }

// Run is one started (or found) run. RunID "" means its latest execution.
type Run struct {
	c     *Client
	ID    string
	RunID string
	// Existing: StartWith found a run under the ID (going, or ended
	// without StartOptions.Rerun) and started nothing.
	Existing bool
}

// StartOptions are a run's options beside its input.
type StartOptions struct {
	// ID is the workflow ID ("" lets Temporal choose).
	ID string
	// Summary and Details show in the Temporal Web UI.
	Summary, Details string
	// Rerun starts a new run under an ID whose run has ended. Without it,
	// asking for the same ID again is idempotent: the existing run is
	// returned (Run.Existing) and nothing starts. A run still going under
	// the ID is always the one returned.
	Rerun bool
	// Eager asks for Temporal's eager workflow start: the run's first
	// workflow task comes back in the start's answer, to a worker of this
	// process on the same Temporal client (package embed), without a
	// poll. Where none is, the run starts as usual.
	Eager bool
}

// Start starts a run with the given input under workflow ID id ("" lets
// Temporal choose).
func (c *Client) Start(ctx context.Context, id string, in Input) (*Run, error) {
	return c.StartWith(ctx, StartOptions{ID: id}, in)
}

// StartWith starts a run with options.
func (c *Client) StartWith(ctx context.Context, o StartOptions, in Input) (*Run, error) {
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	if o.Rerun {
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	}
	var r sdkclient.WorkflowRun
	err := c.withStartAttrs(func(attrs temporal.SearchAttributes) (err error) {
		r, err = c.tc.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
			ID: o.ID, TaskQueue: c.taskQueue, StaticSummary: o.Summary, StaticDetails: o.Details, TypedSearchAttributes: attrs,
			WorkflowIDReusePolicy: reuse, WorkflowExecutionErrorWhenAlreadyStarted: true, EnableEagerStart: o.Eager,
		}, WorkflowType, in)
		return err
	})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return &Run{c: c, ID: o.ID, RunID: started.RunId, Existing: true}, nil
	}
	if err != nil {
		return nil, err
	}
	return &Run{c: c, ID: r.GetID(), RunID: r.GetRunID()}, nil
}

// bareFor is how long a Client starts runs without CapflowStatus once it
// found the namespace does not define it.
const bareFor = 10 * time.Minute

// statusKey is the run's status search attribute.
var statusKey = temporal.NewSearchAttributeKeyKeyword(SearchAttrStatus)

// withStartAttrs calls start with the search attributes a run starts
// with: its status, running, so that it is listed as running at once. The
// workflow upserts its status only once it waits outside its workflow
// task: a run of long local steps would not be listed until it ended.
// Where the namespace does not define CapflowStatus (no capflow worker
// registered it: "search attribute CapflowStatus is not defined", or on
// SQL visibility "no mapping defined for search attribute ..."), start
// is called again without, and the Client remembers it for bareFor (an
// operator may register it meanwhile).
func (c *Client) withStartAttrs(start func(temporal.SearchAttributes) error) error {
	if time.Now().UnixNano() < c.bareUntil.Load() {
		return start(temporal.SearchAttributes{})
	}
	err := start(temporal.NewSearchAttributes(statusKey.ValueSet(string(StatusRunning))))
	var invalid *serviceerror.InvalidArgument
	if errors.As(err, &invalid) && strings.Contains(invalid.Message, "search attribute "+SearchAttrStatus) {
		c.bareUntil.Store(time.Now().Add(bareFor).UnixNano())
		err = start(temporal.SearchAttributes{})
	}
	return err
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
	if err := r.c.tc.GetWorkflow(ctx, r.ID, r.RunID).Get(ctx, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Progress is the run's state now (the progress query).
func (r *Run) Progress(ctx context.Context) (*Result, error) {
	v, err := r.c.tc.QueryWorkflow(ctx, r.ID, r.RunID, ProgressQuery)
	if err != nil {
		return nil, notFound("run", r.ID, err)
	}
	var res Result
	if err := v.Get(&res); err != nil {
		return nil, err
	}
	if info, err := r.c.Describe(ctx, r.ID); err == nil {
		res.Live(info)
	}
	r.agentRounds(ctx, &res)
	return &res, nil
}

// Pause stops the run from starting steps until Resume.
func (r *Run) Pause(ctx context.Context, by string) (*ControlAnswer, error) {
	return r.Update(ctx, UpdatePause, "", ControlRequest{By: by})
}

// Resume resumes a paused run.
func (r *Run) Resume(ctx context.Context, by string) (*ControlAnswer, error) {
	return r.Update(ctx, UpdateResume, "", ControlRequest{By: by})
}

// Decide answers a waiting step (approve, reject, retry, skip, fail).
// updateID makes a repeated call one decision ("": a new one each time).
func (r *Run) Decide(ctx context.Context, updateID string, req DecideRequest) (*ControlAnswer, error) {
	if err := req.Check(); err != nil {
		// Refused here as the run would: no round trip for it.
		return nil, &Refused{Reason: err.Error()}
	}
	return r.Update(ctx, UpdateDecide, updateID, req)
}

// DecideOnce answers the wait the step is in now, under the update ID
// DecisionUpdateID names: the same answer sent again (a retried request, a
// second operator) is the same decision, never a second one. A step that
// is not waiting is sent as is, for the run to refuse with its reason.
//
// A run that ended meanwhile (the first answer let it finish) refuses it
// too, saying what the step's last decision was.
func (r *Run) DecideOnce(ctx context.Context, req DecideRequest) (*ControlAnswer, error) {
	updateID := ""
	if p, err := r.Progress(ctx); err == nil {
		if w := waitOf(p, req.Step); w != nil && w.Run != "" {
			return r.decideGate(ctx, w, req)
		}
		updateID = p.DecisionUpdateID(req)
	}
	ans, err := r.Decide(ctx, updateID, req)
	var refused *Refused
	if errors.As(err, &refused) && refused.ended {
		if p, perr := r.Progress(ctx); perr == nil {
			if why := p.Decided(req.Step); why != "" {
				refused.Reason += "; " + why
			}
		}
	}
	return ans, err
}

// Cancel cancels the run: its tools are stopped, its report still written.
func (r *Run) Cancel(ctx context.Context) error {
	return notFound("run", r.ID, r.c.tc.CancelWorkflow(ctx, r.ID, ""))
}

// Refused is a run-control request the run refused (its validator's
// reason), or one sent to a run that has ended: nothing changed.
type Refused struct {
	Reason string
	ended  bool // the run had ended (or was ending) when the request came
}

func (e *Refused) Error() string { return "refused: " + e.Reason }

// RunEnded reports whether it was refused because the run had ended.
func (e *Refused) RunEnded() bool { return e.ended }

// NotFound is a run (or schedule) that does not exist, or for an update,
// a run that is no longer running.
type NotFound struct{ What, ID string }

func (e *NotFound) Error() string { return fmt.Sprintf("no %s %q", e.What, e.ID) }

// runEnded reports whether the server refused an update because the run
// had ended, or ended while the update waited to be handled (the server
// says NotFound then, though the run is there).
func runEnded(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "workflow execution already completed") ||
		strings.Contains(msg, "aborted by closing workflow")
}

// notFound turns the server's NotFound into a *NotFound.
func notFound(what, id string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return &NotFound{What: what, ID: id}
	}
	return err
}

// Update sends one run-control update (UpdatePause, UpdateResume,
// UpdateDecide) and waits for its answer.
func (r *Run) Update(ctx context.Context, name, updateID string, arg any) (*ControlAnswer, error) {
	h, err := r.c.tc.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
		WorkflowID: r.ID, UpdateName: name, UpdateID: updateID, Args: []any{arg}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
	})
	var ans ControlAnswer
	if err == nil {
		err = h.Get(ctx, &ans)
	}
	if err != nil {
		var app *temporal.ApplicationError
		switch {
		case errors.As(err, &app):
			return nil, &Refused{Reason: app.Message()}
		case runEnded(err):
			return nil, &Refused{Reason: fmt.Sprintf("run %s has ended", r.ID), ended: true}
		}
		if err = notFound("run", r.ID, err); errors.As(err, new(*NotFound)) {
			return nil, err
		}
		return nil, fmt.Errorf("%s %s: %w", name, r.ID, err)
	}
	return &ans, nil
}

// Client is the Client the run was started or found with.
func (r *Run) Client() *Client { return r.c }

// GetRun finds one execution of a run ("" runID: its latest).
func (c *Client) GetRun(id, runID string) *Run { return &Run{c: c, ID: id, RunID: runID} }

// Unreachable reports whether err says the Temporal server did not
// answer (down, or too slow): what a console shows as "Temporal is
// unreachable" rather than as a fault of the run.
func Unreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var un *serviceerror.Unavailable
	var dl *serviceerror.DeadlineExceeded
	if errors.As(err, &un) || errors.As(err, &dl) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// CheckHealth asks the frontend whether it serves (an error when it does
// not answer within ctx): what a caller with many requests to make asks
// once, instead of waiting out each one's retries.
func (c *Client) CheckHealth(ctx context.Context) error {
	_, err := c.tc.CheckHealth(ctx, &sdkclient.CheckHealthRequest{})
	return err
}
