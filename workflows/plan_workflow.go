// Package workflows holds PlanWorkflow and its DAG scheduler. Everything
// here is deterministic: no map iteration that matters for order, no
// wall clock, no goroutines, no I/O; the outside world is reached only
// through the Resolve, RunTool and Finalize activities.
package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/wfapi"
)

var (
	planKey   = temporal.NewSearchAttributeKeyKeyword(wfapi.SearchAttrPlan)
	statusKey = temporal.NewSearchAttributeKeyKeyword(wfapi.SearchAttrStatus)
)

// localRetry is the retry policy of capflow's own activities.
var localRetry = &temporal.RetryPolicy{
	InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 5,
	NonRetryableErrorTypes: caperr.NonRetryable(),
}

// PlanWorkflow runs one plan: Resolve, then the DAG, then Finalize.
func PlanWorkflow(ctx workflow.Context, in wfapi.Input) (*wfapi.Result, error) {
	info := workflow.GetInfo(ctx)
	started := workflow.Now(ctx)
	res := &wfapi.Result{
		Status: wfapi.StatusResolving, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		StartedAt: envelope.Timestamp(started), Steps: []wfapi.StepResult{}, Gaps: []gap.Gap{}, Resolution: []gap.StepResolution{},
	}
	var sched *scheduler
	err := workflow.SetQueryHandler(ctx, wfapi.ProgressQuery, func() (wfapi.Result, error) {
		p := *res
		if sched != nil {
			p.Steps = sched.results(false)
		}
		return p, nil
	})
	if err != nil {
		return nil, err
	}

	planValue := in.Plan
	if in.Request != "" && planValue == nil {
		rt, rerr := route(ctx, in)
		switch {
		case rerr != nil:
			// Routing itself failed (rules broken, LLM unavailable).
			res.Status, res.Message = wfapi.StatusFailed, "routing failed: "+rerr.Error()
			return finalize(ctx, res, nil, started)
		case rt.Plan == nil:
			// Nothing covers the request: a gap, with no step to name.
			res.Status, res.Message, res.Gaps = wfapi.StatusPartialComplete, rt.Message, nonNilGaps(rt.Gaps)
			return finalize(ctx, res, nil, started)
		}
		planValue, res.Route = rt.Plan, rt.Route
	}
	if planValue == nil {
		res.Status, res.Message = wfapi.StatusInvalid, "the workflow input has neither a plan nor a request"
		return finalize(ctx, res, nil, started)
	}

	rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute, RetryPolicy: localRetry, Summary: "resolve: registry, gaps, policy",
	})
	var rr wfapi.ResolveResult
	err = workflow.ExecuteActivity(rctx, wfapi.ResolveActivity, wfapi.ResolveInput{
		Plan: planValue, Inputs: in.Inputs, WorkflowID: res.WorkflowID, RunID: res.RunID,
	}).Get(ctx, &rr)
	if err != nil {
		if temporal.IsCanceledError(err) {
			res.Status, res.Message = wfapi.StatusCancelled, "cancelled while resolving"
		} else {
			res.Status, res.Message = wfapi.StatusFailed, "resolve failed: "+err.Error()
		}
		return finalize(ctx, res, nil, started)
	}
	if rr.Route == nil {
		rr.Route = res.Route
	}
	res.Plan, res.Gaps, res.Resolution, res.Policy, res.Problems = rr.Plan, nonNilGaps(rr.Gaps), rr.Resolution, rr.Policy, rr.Problems
	if res.Resolution == nil {
		res.Resolution = []gap.StepResolution{}
	}
	upsert := func(status wfapi.RunStatus) {
		if rr.SearchAttributes {
			_ = workflow.UpsertTypedSearchAttributes(ctx, planKey.ValueSet(rr.Plan), statusKey.ValueSet(string(status)))
		}
	}
	if rr.Status != preflight.Ready {
		res.Status, res.Message = wfapi.RunStatus(rr.Status), rr.Message
		why := map[string]string{}
		for _, g := range rr.Gaps {
			why[g.StepID] = "gap: " + g.Reason
		}
		if rr.Policy != nil {
			for _, v := range rr.Policy.Violations {
				if v.StepID != "" {
					why[v.StepID] = "policy: " + v.Rule
				}
			}
		}
		for _, s := range rr.Steps {
			reason := why[s.ID]
			if reason == "" {
				reason = "not run: the plan is " + rr.Status
			}
			res.Steps = append(res.Steps, wfapi.StepResult{ID: s.ID, Capability: s.Capability, Status: wfapi.StepBlocked, Tool: s.Tool, Version: s.Version, Reason: reason})
		}
		upsert(res.Status)
		return finalize(ctx, res, &rr, started)
	}

	res.Status = wfapi.StatusRunning
	upsert(res.Status)
	sched = newScheduler(ctx, &rr, res)
	sched.run()
	res.Status, res.Message = sched.outcome()
	res.Steps = sched.results(true)
	upsert(res.Status)
	return finalize(ctx, res, &rr, started)
}

func nonNilGaps(g []gap.Gap) []gap.Gap {
	if g == nil {
		return []gap.Gap{}
	}
	return g
}

// finalize writes the reports, even when the run was cancelled, and
// returns the result.
func finalize(ctx workflow.Context, res *wfapi.Result, rr *wfapi.ResolveResult, started time.Time) (*wfapi.Result, error) {
	// A cancelled workflow's context is done: reports are written on a
	// disconnected one so a cancelled run still leaves its report.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	ended := workflow.Now(dctx)
	res.EndedAt = envelope.Timestamp(ended)
	res.DurationMS = ended.Sub(started).Milliseconds()
	fctx := workflow.WithActivityOptions(dctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: localRetry, Summary: "finalize: report.json + report.md",
	})
	var paths wfapi.ReportPaths
	if err := workflow.ExecuteActivity(fctx, wfapi.FinalizeActivity, wfapi.FinalizeInput{Result: *res, Resolved: rr}).Get(dctx, &paths); err != nil {
		workflow.GetLogger(ctx).Error("finalize failed", "error", err)
		if res.Message == "" {
			res.Message = "report not written: " + err.Error()
		} else {
			res.Message += " (report not written: " + err.Error() + ")"
		}
	}
	res.Outputs, paths.Outputs = paths.Outputs, nil
	res.Report = paths
	workflow.SetCurrentDetails(dctx, fmt.Sprintf("**%s**: %s", res.Status, res.Message))
	return res, nil
}

func route(ctx workflow.Context, in wfapi.Input) (*wfapi.RouteResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute, RetryPolicy: localRetry, Summary: "route: request text → plan",
	})
	var rt wfapi.RouteResult
	err := workflow.ExecuteActivity(actx, wfapi.RouteActivity, wfapi.RouteInput{Request: in.Request, Inputs: in.Inputs}).Get(ctx, &rt)
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			return nil, errors.New(app.Error())
		}
		return nil, err
	}
	return &rt, nil
}
