// Package workflows holds PlanWorkflow and its DAG scheduler. Everything
// here is deterministic: no map iteration that matters for order, no
// wall clock, no goroutines, no I/O; the outside world is reached only
// through the Resolve, RunTool and Finalize activities.
package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/verdict"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
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

// PlanWorkflow runs one plan: Resolve, then the DAG, then Finalize. A
// run whose history grows long continues as new (segments.go); its start
// then carries a reference to the state its previous segment stored.
func PlanWorkflow(ctx workflow.Context, start wfapi.Start) (*wire.Result, error) {
	res, err := planWorkflow(ctx, start)
	if res == nil || err != nil {
		return nil, err
	}
	if start.Brief && workflow.GetInfo(ctx).ParentWorkflowExecution != nil {
		wfapi.Brief(res) // an agent's round: its history keeps the outcomes
	}
	return res, nil
}

func planWorkflow(ctx workflow.Context, start wfapi.Start) (*wfapi.Result, error) {
	strict := versionOf(ctx, changeTrustedInput) >= 1
	ctx = withLocal(ctx)
	info := workflow.GetInfo(ctx)
	started := workflow.Now(ctx)
	res := &wfapi.Result{
		Status: wfapi.StatusResolving, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		StartedAt: envelope.Timestamp(started), Steps: []wfapi.StepResult{}, Gaps: []wire.Gap{}, Resolution: []wire.Resolution{},
	}
	var sched *scheduler
	err := workflow.SetQueryHandler(ctx, wfapi.ProgressQuery, func() (*wire.Result, error) {
		p := *res
		if sched != nil {
			p.Steps, p.Segments = sched.results(false), sched.segment
		}
		wfapi.Trim(&p, wfapi.MaxResultBytes)
		p.Warnings = append(slices.Clone(p.Warnings), unreadSignals(ctx)...)
		return &p, nil
	})
	if err != nil {
		return nil, err
	}
	if err := registerGraph(ctx, &sched); err != nil {
		return nil, err
	}
	if err := registerControl(ctx, &sched); err != nil {
		return nil, err
	}

	in, resume := start.Input, start.Resume
	if strict {
		if refused := admit(ctx, &start); len(refused) > 0 {
			return refuse(ctx, res, started, refused), nil
		}
		if c := start.Carry; c != nil {
			if resume, err = loadCarry(ctx, c); err != nil {
				res.Status, res.Message = wfapi.StatusFailed, "cannot load the run's carry: "+err.Error()
				return finalize(ctx, res, nil, started, nil)
			}
		}
		if p := start.ParentInputs; p != nil {
			if in.Inputs, err = loadParentInputs(ctx, p); err != nil {
				res.Status, res.Message = wfapi.StatusFailed, "cannot load the inputs the parent run stored: "+err.Error()
				return finalize(ctx, res, nil, started, nil)
			}
		}
	}
	// After admit: only a parent sets a lineage.
	ctx = withLineage(ctx, start.Lineage)
	return runPlan(ctx, res, started, in, resume, &sched)
}

// runPlan resolves the plan (or takes the resolution an earlier segment
// carried), then runs its DAG and writes its report.
func runPlan(ctx workflow.Context, res *wfapi.Result, started time.Time, in wfapi.Input, resume *wfapi.Resume, schedp **scheduler) (*wfapi.Result, error) {
	var rr wfapi.ResolveResult
	if r := resume; r != nil {
		rr = r.Resolved
		res.RunID, res.StartedAt, res.Plan, res.Route, res.Policy = r.FirstRunID, r.StartedAt, rr.Plan, rr.Route, rr.Policy
		res.Gaps = nonNilGaps(rr.Gaps)
		if t, perr := time.Parse(envelope.TimeFormat, r.StartedAt); perr == nil {
			started = t
		}
	} else if done, err := resolve(ctx, in, res, &rr); done || err != nil {
		return finalize(ctx, res, nil, started, nil)
	}
	paged := len(rr.Steps) == 0 && rr.StepsRef != nil && rr.StepsRef.Count > 0
	if err := loadSteps(ctx, &rr); err != nil {
		res.Status, res.Message = wfapi.StatusFailed, "cannot load the resolved steps: "+err.Error()
		return finalize(ctx, res, lean(&rr, paged), started, nil)
	}
	upsert := func(status wfapi.RunStatus) {
		if rr.SearchAttributes {
			_ = workflow.UpsertTypedSearchAttributes(ctx, planKey.ValueSet(rr.Plan), statusKey.ValueSet(string(status)))
		}
	}
	if rr.Status != verdict.Ready {
		res.Status, res.Message = wfapi.RunStatus(rr.Status), rr.Message
		res.Steps = blocked(&rr, paged)
		upsert(res.Status)
		return finalize(ctx, res, lean(&rr, paged), started, nil)
	}
	sched := startScheduler(ctx, &rr, res, upsert)
	*schedp = sched
	// Resolve's outcomes of the first inline steps, kept as a batch's (baseline 4).
	sched.ways.inline.keepAhead(rr.Ahead)
	rr.Ahead = nil
	reuse := in.Reuse
	if resume != nil {
		reuse = resume.Reuse
	}
	sched.setReuse(reuse)
	if resume != nil {
		if err := sched.resumeFrom(resume); err != nil {
			res.Status, res.Message = wfapi.StatusFailed, "cannot resume the run: "+err.Error()
			return finalize(ctx, res, lean(&rr, paged), started, nil)
		}
	}
	sched.run()
	sched.done = true
	if sched.continuing() {
		return continueAsNew(ctx, sched, res)
	}
	res.Status, res.Message = sched.outcome()
	res.Warnings = append(append(sched.m.Warnings(), sched.lostProcesses()...), sched.damage...)
	res.LostHosts = sched.lostHosts
	res.Steps, res.Segments = sched.results(true), sched.segment
	upsert(res.Status)
	if sched.segment > 0 {
		return finalize(ctx, res, leanStored(&rr), started, &segmentEnd{steps: sched.ended(), checkpoints: sched.checkpoints})
	}
	return finalize(ctx, res, lean(&rr, paged), started, nil)
}

// startScheduler makes the scheduler of a run that is ready: its status
// running, upserted now or, from baseline 2, once the run goes outside its
// workflow task (outside.go).
func startScheduler(ctx workflow.Context, rr *wfapi.ResolveResult, res *wfapi.Result, upsert func(wfapi.RunStatus)) *scheduler {
	lazy := versionOf(ctx, changeBaseline2) >= 1
	res.Status = wfapi.StatusRunning
	if !lazy {
		upsert(res.Status)
	}
	sched := newScheduler(ctx, rr, res)
	sched.upsert = upsert
	if lazy {
		sched.startLazily()
	}
	return sched
}

// resolve routes a request (when the input has one) and runs the Resolve
// activity; done is true when the run ends here (its result is set).
func resolve(ctx workflow.Context, in wfapi.Input, res *wfapi.Result, rr *wfapi.ResolveResult) (done bool, err error) {
	planValue, routeCalls := in.Plan, 0
	if in.Request != "" && planValue == nil && in.PlanFile == "" {
		rt, rerr := route(ctx, in)
		switch {
		case rerr != nil:
			// Routing itself failed (rules broken, LLM unavailable).
			res.Status, res.Message = wfapi.StatusFailed, "routing failed: "+rerr.Error()
			return true, nil
		case rt.Plan == nil:
			// Nothing covers the request: a gap, with no step to name.
			res.Status, res.Message, res.Gaps = wfapi.StatusPartialComplete, rt.Message, nonNilGaps(rt.Gaps)
			return true, nil
		}
		planValue, res.Route, routeCalls = rt.Plan, rt.Route, rt.LLMCalls
	}
	if planValue == nil && in.PlanFile == "" {
		res.Status, res.Message = wfapi.StatusInvalid, "the workflow input has neither a plan nor a request"
		return true, nil
	}
	ropts := workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute, RetryPolicy: localRetry, Summary: "resolve: registry, gaps, policy",
	}
	rin := wfapi.ResolveInput{Plan: planValue, Inputs: in.Inputs, WorkflowID: res.WorkflowID, RunID: res.RunID, CarrySteps: true, LLMCalls: routeCalls}
	// A rerun's steps may reuse another run's: none is evaluated ahead.
	rin.Ahead = (in.Reuse == nil || in.Reuse.WorkflowID == "") && versionOf(ctx, changeBaseline4) >= 1
	if planValue == nil {
		rin.PlanFile = in.PlanFile
	}
	if err := bookkeeping(ctx, usesLocal(ctx), ropts, wfapi.ResolveActivity, rin, rr); err != nil {
		if temporal.IsCanceledError(err) {
			res.Status, res.Message = wfapi.StatusCancelled, "cancelled while resolving"
		} else {
			res.Status, res.Message = wfapi.StatusFailed, "resolve failed: "+err.Error()
		}
		return true, nil
	}
	if rr.Route == nil {
		rr.Route = res.Route
	}
	// The plan the run was given (or routed to) is in history already; the
	// report gets it from here, so Resolve's recorded result need not hold
	// it again (a plan file's is never recorded: it may be megabytes).
	if rr.PlanValue == nil {
		rr.PlanValue = planValue
	}
	res.Plan, res.Gaps, res.Resolution, res.Policy, res.Problems = rr.Plan, nonNilGaps(rr.Gaps), rr.Resolution, rr.Policy, rr.Problems
	res.Omitted = rr.Omitted
	if res.Resolution == nil {
		res.Resolution = []wire.Resolution{}
	}
	return false, nil
}

// blocked lists the steps of a plan that will not run, each with why. A
// stored (large) plan lists only the steps with a reason of their own.
func blocked(rr *wfapi.ResolveResult, paged bool) []wfapi.StepResult {
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
	out := []wfapi.StepResult{}
	for _, s := range rr.Steps {
		reason := why[s.ID]
		if reason == "" {
			if paged {
				continue
			}
			reason = "not run: the plan is " + rr.Status
		}
		out = append(out, wfapi.StepResult{ID: s.ID, Capability: s.Capability, Status: wfapi.StepBlocked, Tool: s.Tool, Version: s.Version, Reason: reason})
	}
	return out
}

// continueAsNew ends a drained segment: its steps go to a checkpoint, and
// the run goes on as a new execution with a reference to its carry (runs
// recorded before segment blobs: the carry itself).
func continueAsNew(ctx workflow.Context, sched *scheduler, res *wfapi.Result) (*wfapi.Result, error) {
	carry := sched.carry(res.RunID, res.StartedAt)
	var next wfapi.Start
	var err error
	if versionOf(ctx, changeSegmentBlobs) == workflow.DefaultVersion {
		cctx := workflow.WithActivityOptions(ctx, onHost(sched.rr, carryOptions("", sched.segment+1)))
		err = workflow.ExecuteActivity(cctx, wfapi.CheckpointActivity, wfapi.CheckpointInput{
			RunDir: sched.rr.RunDir, Segment: sched.segment + 1, Steps: sched.ended(),
		}).Get(ctx, nil)
		next.Resume = carry
	} else {
		next.Carry, err = storeSegment(ctx, sched, carry)
	}
	if err != nil {
		// Without the checkpoint the report would lose steps: end here.
		if temporal.IsCanceledError(err) {
			sched.m.CancelRun("the run was cancelled")
			res.Status, res.Message = wfapi.StatusCancelled, "the run was cancelled"
		} else {
			res.Status, res.Message = wfapi.StatusFailed, "cannot checkpoint the run: "+err.Error()
		}
		res.Steps = sched.results(true)
		return finalize(ctx, res, leanStored(sched.rr), workflow.Now(ctx), nil)
	}
	if workflow.GetInfo(ctx).ParentWorkflowExecution != nil {
		// A sub-plan's next segment keeps its parent's lineage; a root's
		// first run ID is kept by the server.
		next.Lineage = sched.lineage
	}
	return nil, workflow.NewContinueAsNewError(ctx, wfapi.WorkflowType, next)
}

func nonNilGaps(g []wire.Gap) []wire.Gap {
	if g == nil {
		return []wire.Gap{}
	}
	return g
}

// finalize writes the reports, even when the run was cancelled, and
// returns the result. steps, when set, is what this segment passes of a
// run that continued as new (Finalize reads the rest from checkpoints).
// segmentEnd is what the last segment of a long run passes Finalize: the
// steps it ended, and the earlier segments' checkpoints.
type segmentEnd struct {
	steps       []wfapi.StepResult
	checkpoints []wfapi.Blob
}

func finalize(ctx workflow.Context, res *wfapi.Result, rr *wfapi.ResolveResult, started time.Time, seg *segmentEnd) (*wfapi.Result, error) {
	// A cancelled workflow's context is done: reports are written on a
	// disconnected one so a cancelled run still leaves its report.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	endStatus(dctx, res.Status)
	ended := workflow.Now(dctx)
	res.EndedAt = envelope.Timestamp(ended)
	res.DurationMS = ended.Sub(started).Milliseconds()
	fopts := workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute, RetryPolicy: localRetry, Summary: "finalize: report.json + report.md",
	}
	if rr != nil && rr.HostQueue != "" {
		// The report is written, and the run's processes stopped, on its
		// host; a lost host must not keep the run from ending.
		fopts.TaskQueue, fopts.ScheduleToStartTimeout = rr.HostQueue, time.Minute
	}
	fin := wfapi.FinalizeInput{Result: *res, Resolved: rr, Segments: res.Segments}
	if seg != nil {
		fin.Result.Steps, fin.Checkpoints = seg.steps, seg.checkpoints
		if b, ok := lastSegment(dctx, rr, res.Segments+1, seg.steps); ok {
			// Stored like the earlier segments' checkpoints: Finalize reads
			// it from there.
			fin.Result.Steps, fin.Segments = []wfapi.StepResult{}, res.Segments+1
			fin.Checkpoints = append(slices.Clone(seg.checkpoints), b)
		}
	} else {
		wfapi.Lighten(&fin.Result, wfapi.MaxResultBytes)
	}
	var paths wfapi.Finalized
	err := bookkeeping(dctx, usesLocal(dctx), fopts, wfapi.FinalizeActivity, fin, &paths)
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
		// The run's host is gone: any worker writes the report (the host's
		// processes, if any, cannot be stopped from there).
		fopts.TaskQueue, fopts.ScheduleToStartTimeout = "", 0
		fin.Result.Message += fmt.Sprintf(" (the run's host %s was lost)", rr.HostQueue)
		// Its run folder went with it: the report goes to this worker's.
		lost := *rr
		lost.RunDir = ""
		fin.Resolved = &lost
		err = workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, fopts), wfapi.FinalizeActivity, fin).Get(dctx, &paths)
	}
	if err != nil {
		workflow.GetLogger(ctx).Error("finalize failed", "error", err)
		if res.Message == "" {
			res.Message = "report not written: " + err.Error()
		} else {
			res.Message += " (report not written: " + err.Error() + ")"
		}
	}
	if a := paths.Steps; a != nil {
		res.Steps, res.StepCounts, res.StepsOmitted = a.Steps, a.Counts, a.Omitted
	}
	res.Outputs, res.TraceID, res.Report, res.Next = paths.Outputs, paths.TraceID, paths.ReportPaths, paths.Next // Next: none in runs recorded before it
	wfapi.Trim(res, wfapi.MaxResultBytes)
	workflow.SetCurrentDetails(dctx, fmt.Sprintf("**%s**: %s%s%s", res.Status, res.Message, cachedNote(res.Steps), traceNote(res.TraceID)))
	workflow.GetMetricsHandler(dctx).WithTags(map[string]string{"status": string(res.Status)}).Counter(wfapi.MetricRunsEnded).Inc(1)
	return res, nil
}

func route(ctx workflow.Context, in wfapi.Input) (*wfapi.RouteResult, error) {
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute, RetryPolicy: localRetry, Summary: "route: request text → plan",
	}
	var rt wfapi.RouteResult
	err := bookkeeping(ctx, usesLocal(ctx), opts, wfapi.RouteActivity, wfapi.RouteInput{Request: in.Request, Inputs: in.Inputs}, &rt)
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			return nil, errors.New(app.Error())
		}
		return nil, err
	}
	return &rt, nil
}

// unreadSignals warns of signals sent to the run: capflow reads none (run
// control is updates), and Temporal accepts any signal silently.
func unreadSignals(ctx workflow.Context) []string {
	var out []string
	for _, name := range workflow.GetUnhandledSignalNames(ctx) {
		out = append(out, fmt.Sprintf("a signal %q was sent to this run, which reads no signals: run control is updates (capflow approve, pause, ...; docs/run-control.md)", name))
	}
	return out
}
