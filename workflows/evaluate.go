package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/expr"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

// Decisions a run makes from data: a step's condition (evaluated here over
// the values in history, or by the Evaluate activity when they are stored
// by reference) and a for_each step's list.

// evalWhen evaluates a step's condition in the workflow. ok is false when
// a step it reads stored its data in a file: then the Evaluate activity
// evaluates it.
func (s *scheduler) evalWhen(st *stepState) (run, ok bool) {
	scope, deps, inHistory := s.historyScope(whenExpr(st.step.When))
	if !inHistory {
		return false, false
	}
	// Pure: CEL over the values recorded in history.
	//workflowcheck:ignore
	run, err := expr.Eval(st.step.When, scope.Inputs, wfapi.Conditions(deps, func(id string) any { return deps[id].Data }), "", nil, 0)
	if err != nil {
		hint := ""
		for _, id := range sortedKeys(deps) {
			if deps[id].Status == wfapi.StepSkipped || deps[id].Status == wfapi.StepFailed {
				hint = fmt.Sprintf(" (step %s %s, so it has no data: guard with steps.%s.success)", id, deps[id].Status, id)
				break
			}
		}
		st.env = s.synthEnvelope(st.step.Tool, caperr.InvalidInput, fmt.Sprintf("when %q: %v%s", st.step.When, err, hint))
		st.started = workflow.Now(s.ctx)
		s.m.Start(st.step.ID)
		s.m.End(st.step.ID, dag.Failed, caperr.InvalidInput, "", st.env.Message)
		return false, true
	}
	if !run {
		s.m.SkipWhenFalse(st.step.ID)
		return false, true
	}
	return true, true
}

// evaluate asks the Evaluate activity for a for_each step's items (or a
// condition over stored data).
func (s *scheduler) evaluate(st *stepState) {
	step := st.step
	s.inflight++
	in := wfapi.EvaluateInput{StepID: step.ID, ForEach: step.ForEach, ItemName: step.ItemName, When: step.When}
	in.Inputs, in.Deps = s.referenced(step.ForEach, whenExpr(step.When))
	in = s.fitEvaluate(in)
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(s.stepCtx(step.ID), onHost(s.rr, workflow.ActivityOptions{
		ActivityID: "decide-" + step.ID, StartToCloseTimeout: 2 * time.Minute, RetryPolicy: localRetry,
		Summary: step.ID + " · decide: for_each items and when",
	})))
	st.cancel = cancel
	st.started = workflow.Now(s.ctx)
	s.m.Start(step.ID)
	f := workflow.ExecuteActivity(actx, wfapi.EvaluateActivity, in)
	id := step.ID
	s.sel.AddFuture(f, func(f workflow.Future) { s.evaluated(id, f) })
}

// evaluated carries out the Evaluate activity's answer.
func (s *scheduler) evaluated(id string, f workflow.Future) {
	s.inflight--
	st := s.steps[id]
	var out wfapi.EvaluateResult
	err := f.Get(s.ctx, &out)
	var canceled *temporal.CanceledError
	switch {
	case s.stopped() || errors.As(err, &canceled):
		// The run stopped while the decision travelled: start nothing.
		st.env = s.synthEnvelope(st.step.Tool, caperr.Cancelled, "cancelled: "+s.stopReason())
		s.m.Cancel(id, s.stopReason())
	case err != nil:
		o := s.decode(st.step, err, s.stopReason())
		st.env, st.attempts, st.envFile = o.env, o.attempts, o.envFile
		s.fail(st, st.env.Message)
	case kindOf(st.step) == kindItems:
		s.expand(st, &out)
	case !out.Run:
		s.m.SkipWhenFalse(id)
	default:
		s.m.Requeue(id, "")
		s.startOne(st)
	}
}

// historyScope gathers what the values reference, as a scope the workflow
// can evaluate itself; inHistory is false when a referenced step stored its
// data in a file (then an activity evaluates).
func (s *scheduler) historyScope(values ...any) (scope plan.Scope, deps map[string]wfapi.StepOutcome, inHistory bool) {
	inputs, deps := s.referenced(values...)
	scope = plan.Scope{Inputs: inputs, Steps: map[string]plan.StepOutcome{}}
	for _, id := range sortedKeys(deps) {
		o := deps[id]
		if o.DataFile != "" {
			return scope, deps, false
		}
		scope.Steps[id] = plan.StepOutcome{Success: o.Success, Data: o.Data}
	}
	return scope, deps, true
}
