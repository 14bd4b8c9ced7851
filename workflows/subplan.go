package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
)

// startChild runs a sub-plan step as a child PlanWorkflow with its own run
// folder and report. Its inputs are the step's with, evaluated here (or by
// the Evaluate activity when they read stored data).
func (s *scheduler) startChild(st *stepState) {
	step := st.step
	s.inflight++
	st.started = workflow.Now(s.ctx)
	s.m.Start(step.ID)
	scope, deps, inHistory := s.historyScope(step.With)
	if inHistory {
		// Pure: references resolved over values in history (map order
		// does not reach the result).
		//workflowcheck:ignore
		v, err := scope.Eval(step.With)
		if err != nil {
			s.endChild(st, nil, caperr.New(caperr.InvalidInput, "cannot evaluate the sub-plan's inputs: %v", err))
			return
		}
		with, _ := v.(map[string]any)
		s.execChild(st, with, nil)
		return
	}
	actx := workflow.WithActivityOptions(s.stepCtx(step.ID), onHost(s.rr, workflow.ActivityOptions{
		ActivityID: "decide-" + step.ID, StartToCloseTimeout: 2 * time.Minute, RetryPolicy: localRetry,
		Summary: step.ID + " · evaluate the sub-plan's inputs",
	}))
	f := workflow.ExecuteActivity(actx, wfapi.EvaluateActivity, s.fitEvaluate(wfapi.EvaluateInput{StepID: step.ID, With: orEmptyWith(step.With), Inputs: scope.Inputs, Deps: deps, SpillWith: true}))
	id := step.ID
	s.sel.AddFuture(f, func(f workflow.Future) {
		st := s.steps[id]
		var out wfapi.EvaluateResult
		if err := f.Get(s.ctx, &out); err != nil {
			s.endChild(st, nil, err)
			return
		}
		if s.stopped() {
			s.endChild(st, nil, caperr.New(caperr.Cancelled, "not started: %s", s.stopReason()))
			return
		}
		s.execChild(st, out.With, out.WithSpilled)
	})
}

func orEmptyWith(w map[string]any) map[string]any {
	if w == nil {
		return map[string]any{}
	}
	return w
}

// childInput is a sub-plan's start: its plan and inputs, or, when the
// inputs are too large to travel (stored by the Evaluate activity, or here),
// the reference the child loads them by (wfapi.ParentInputs).
func (s *scheduler) childInput(step wfapi.ResolvedStep, with map[string]any, spilled *wfapi.Blob) wfapi.Start {
	start := wfapi.Start{Input: wfapi.Input{Plan: step.PlanValue, Inputs: with}, Lineage: s.lineage}
	if spilled == nil {
		raw, large := s.childTooLarge(with)
		if !large {
			return start
		}
		b, ok := s.spill("input", raw, with, step.ID)
		if !ok {
			return start
		}
		spilled = &b
	}
	start.Inputs, start.ParentInputs = nil, &wfapi.ParentInputs{Blob: *spilled, Host: s.rr.HostQueue}
	return start
}

func (s *scheduler) execChild(st *stepState, with map[string]any, spilled *wfapi.Blob) {
	step := st.step
	if step.Agent != nil {
		s.execAgent(st, with, spilled)
		return
	}
	childID := s.workflowID + "." + step.ID
	cctx, cancel := workflow.WithCancel(workflow.WithChildOptions(s.stepCtx(step.ID), workflow.ChildWorkflowOptions{
		WorkflowID:            childID,
		StaticSummary:         fmt.Sprintf("sub-plan %s of %s (step %s)", step.Plan, s.rr.Plan, step.ID),
		TypedSearchAttributes: s.childAttrs(),
	}))
	st.cancel = cancel
	f := workflow.ExecuteChildWorkflow(cctx, wfapi.WorkflowType, s.childInput(step, with, spilled))
	id := step.ID
	s.sel.AddFuture(f, func(f workflow.Future) {
		var res wfapi.Result
		err := f.Get(s.ctx, &res)
		st := s.steps[id]
		if res.WorkflowID == "" {
			res.WorkflowID = childID
		}
		s.endChild(st, &res, err)
	})
}

// endChild records a sub-plan step's end: its data is the child's outputs.
func (s *scheduler) endChild(st *stepState, res *wfapi.Result, err error) {
	s.inflight--
	ts := envelope.Timestamp(workflow.Now(s.ctx))
	id := st.step.ID
	if res != nil {
		st.child = &wfapi.ChildRun{WorkflowID: res.WorkflowID, RunID: res.RunID, Status: res.Status, Report: res.Report}
	}
	var canceled *temporal.CanceledError
	switch {
	case err == nil && res != nil && res.Status == wfapi.StatusPassed:
		data := res.Outputs
		if data == nil {
			data = map[string]any{}
		}
		msg := fmt.Sprintf("sub-plan %s passed: %s", st.step.Plan, res.Message)
		st.env = &envelope.Envelope{ToolID: "capflow-plan", Success: true, Timestamp: ts, Message: msg, Data: data,
			Feedback: []envelope.Feedback{{Phase: "plan", Level: envelope.LevelInfo, Message: msg, Timestamp: ts}}}
		st.attempts = 1
		s.m.Succeed(id)
	case errors.As(err, &canceled) || (err == nil && res != nil && res.Status == wfapi.StatusCancelled) || (s.stopped() && err != nil):
		st.env = s.synthEnvelope("capflow-plan", caperr.Cancelled, "cancelled: "+s.stopReason())
		s.m.Cancel(id, s.stopReason())
	default:
		code, why := caperr.ToolFailure, ""
		switch {
		case err != nil:
			code, why = caperr.CodeOf(err), err.Error()
			if code == caperr.InternalError {
				code = caperr.ToolFailure
			}
		case res.Status == wfapi.StatusPartialComplete:
			code, why = caperr.ToolNotFound, fmt.Sprintf("sub-plan %s has gaps: %s", st.step.Plan, res.Message)
		case res.Status == wfapi.StatusBlockedByPolicy:
			code, why = caperr.PolicyBlocked, fmt.Sprintf("sub-plan %s is blocked by policy: %s", st.step.Plan, res.Message)
		default:
			why = fmt.Sprintf("sub-plan %s %s: %s", st.step.Plan, res.Status, res.Message)
		}
		st.env = s.synthEnvelope("capflow-plan", code, why)
		st.attempts = 1
		s.fail(st, why)
	}
}
