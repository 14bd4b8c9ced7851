package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// stepKind is what a step is; each kind's driver is in the file named.
type stepKind int

const (
	kindTool     stepKind = iota // one tool's RunTool, the way chooseWay picks (steps.go, ways.go)
	kindItems                    // for_each: its items, or batches of them as child runs (foreach.go, batches.go)
	kindPlan                     // a sub-plan's child run (subplan.go)
	kindApproval                 // a flow.approve gate, waiting for a person (control.go)
	kindAgent                    // an agent's child run: a model proposes, capflow checks (agent.go, agentrun/)
)

// kindOf is what step is.
func kindOf(step wfapi.ResolvedStep) stepKind {
	switch {
	case step.ForEach != nil:
		return kindItems
	case step.Approval:
		return kindApproval
	case step.Plan != "":
		return kindPlan
	case step.Agent != nil:
		return kindAgent
	}
	return kindTool
}

// A way is how one unit of work (a step, or one of its for_each items)
// reaches its tool's RunTool. chooseWay picks it from facts alone (a pure
// function, table-tested); the way owns its state: what it counts in a
// workflow task, its queue, the version it asked. A new way is a wayKind,
// a type with start and newTask, its case in chooseWay and its field in
// ways (docs/architecture.md, "A new way a step runs"). Workflow code
// builds no envelope with envelope.NewBuilder (it reads the wall clock):
// dispatcher.synthEnvelope stamps workflow time.
type way interface {
	// start runs u's RunTool and returns the future u's driver waits for.
	start(d *dispatcher, u unit) workflow.Future
	// newTask clears what the way counts per workflow task.
	newTask()
}

// wayKind names a way.
type wayKind int

const (
	// wayRegular: an activity on the run's host queue (or the tool's own).
	wayRegular wayKind = iota
	// wayEager: its first attempt on the workflow's own queue (eager.go).
	wayEager
	// wayLocal: local activities on the workflow's worker, then regular (local.go).
	wayLocal
	// wayInline: with the steps started together, one local activity (inline.go).
	wayInline
	// wayCount counts the ways: a new one goes before it.
	wayCount
)

// Paths, as a step's result reports how it ran (wire.StepResult.Execution;
// a way sets its unit's path).
const (
	PathActivity = "activity"
	PathLocal    = "local"
	// PathLocalThenActivity: local attempts failed (or the workflow ran on
	// another host than the run's), the rest ran as a regular activity.
	PathLocalThenActivity = "local, then activity"
	// PathInline: the step ran in a batch of inline steps, one local
	// activity for the steps started together (docs/manifests.md,
	// execution: inline).
	PathInline = "inline"
)

// Paths of an inline step before its result (never reported): waiting
// for its batch, and in a batch that runs.
const (
	pathQueued  = "queued"
	pathBatched = "batched"
)

// unit is one unit of work as its way gets it.
type unit struct {
	ctx  workflow.Context // cancellable: cancelling it stops the unit
	step wfapi.ResolvedStep
	opts workflow.ActivityOptions // its regular activity's
	in   wfapi.RunToolInput
	path *string // gets the path taken, as the step's result reports it
}

// wayFacts are everything choosing a way reads.
type wayFacts struct {
	runLocal  bool // the run uses local activities (its profile)
	local     bool // the step's execution is local (or inline)
	inline    bool // ... and inline
	cancelled bool // the unit's context is done
	item      bool // a for_each item (a fan-out: never eager)
	// eagerSteps is the run's temporal.eager_steps; the unit goes to
	// taskQueue, the run's host is hostQueue, and it may make maxAttempts.
	eagerSteps           int
	hostQueue, taskQueue string
	maxAttempts          int32
}

// chooseWay is the way a unit runs. An eager step has attempts after the
// first (an attempt a stopped host's open poll took from the shared queue
// only times out: the rest run on the host's queue) and goes to the run's
// host.
func chooseWay(f wayFacts) wayKind {
	switch {
	case f.runLocal && f.local && f.inline && !f.cancelled:
		return wayInline
	case f.runLocal && f.local:
		return wayLocal
	case f.eagerSteps > 0 && f.hostQueue != "" && f.taskQueue == f.hostQueue && !f.item && f.maxAttempts > 1:
		return wayEager
	}
	return wayRegular
}

// ways are a dispatcher's ways, one of each kind.
type ways struct {
	regular regularWay
	eager   eagerWay
	local   localWay
	inline  inlineWay
}

// of is the way of kind k.
func (w *ways) of(k wayKind) way {
	switch k {
	case wayEager:
		return &w.eager
	case wayLocal:
		return &w.local
	case wayInline:
		return &w.inline
	}
	return &w.regular
}

// newTask tells every way a new workflow task began.
func (w *ways) newTask() {
	for k := range wayCount {
		w.of(k).newTask()
	}
}

// runTool runs a step's (or an item's) RunTool the way chooseWay picks.
// ctx may be cancellable; path gets the path taken.
func (d *dispatcher) runTool(ctx workflow.Context, step wfapi.ResolvedStep, opts workflow.ActivityOptions, in wfapi.RunToolInput, path *string) workflow.Future {
	u := unit{ctx: ctx, step: step, opts: opts, in: in, path: path}
	return d.ways.of(chooseWay(d.factsOf(u))).start(d, u)
}

// factsOf are the facts chooseWay reads of u in this run: a new fact is a
// field of wayFacts filled here.
func (d *dispatcher) factsOf(u unit) wayFacts {
	return wayFacts{runLocal: d.p.local, local: u.step.Local, inline: u.step.Inline, cancelled: u.ctx.Err() != nil,
		item: u.in.Step.Item != nil, eagerSteps: d.p.eagerSteps, hostQueue: d.rr.HostQueue, taskQueue: u.opts.TaskQueue,
		maxAttempts: u.opts.RetryPolicy.MaximumAttempts}
}

// regularWay runs a unit as one activity, its attempts retried by the
// server; it also goes on from a first way whose attempts failed (after).
type regularWay struct{}

func (*regularWay) newTask() {}

func (*regularWay) start(d *dispatcher, u unit) workflow.Future {
	*u.path = PathActivity
	return workflow.ExecuteActivity(workflow.WithActivityOptions(u.ctx, d.withinDeadline(u.opts, false)), wfapi.RunToolActivity, u.in)
}

// then is how a unit whose first way was local or eager goes on.
type then struct {
	unit          // its regular activity's options and input
	tried int32   // attempts the first way was allowed
	first wayKind // wayLocal or wayEager
}

// thenRegular waits for a unit's first activity f and, when goesOn says
// so, runs the rest as a regular activity on the host's queue, its retry
// policy and first wait continuation's.
func (d *dispatcher) thenRegular(f workflow.Future, t then) workflow.Future {
	ctx := t.ctx
	fut, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		var out wfapi.RunToolResult
		err := f.Get(gctx, &out)
		if t.first == wayLocal {
			d.ways.local.done++
		}
		wrong := isWrongHost(err)
		if wrong && t.first == wayEager && ctx.Err() != nil {
			// Refused while the step was being stopped: it never ran.
			err = temporal.NewCanceledError()
		}
		left := max(t.step.MaxAttempts, 1) - int(t.tried)
		// Past the run's deadline (its clamp is what timed the local
		// attempt out), nothing goes on as a regular activity (version 2).
		end := firstEnd{failed: err != nil, wrongHost: wrong, stopping: ctx.Err() != nil,
			late: d.deadlineV >= 2 && d.pastDeadline(0), retryable: retryable(err), left: left}
		if !goesOn(end) {
			set.Set(out, localTimeout(err, t))
			return
		}
		if d.leave != nil {
			d.leave()
		}
		in, ropts := t.in, t.opts
		in.Host = ""
		if t.first == wayLocal {
			*t.path = PathLocalThenActivity
		} else {
			// The host's own activity ('@': no step ID has one, so no
			// other step's activity can have this ID).
			ropts.ActivityID += wire.OnHostSuffix
		}
		if !wrong {
			in.AttemptsBefore = t.tried
			if t.first == wayLocal {
				ropts.ActivityID += "-after-local"
			}
			backoff := t.first == wayEager || versionOf(gctx, changeLocalBackoff) >= 1
			var wait time.Duration
			ropts.RetryPolicy, wait = continuation(*t.opts.RetryPolicy, t.tried, left, backoff)
			if backoff {
				_ = workflow.Sleep(gctx, wait)
			}
		}
		var again wfapi.RunToolResult
		err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ropts), wfapi.RunToolActivity, in).Get(gctx, &again)
		set.Set(again, err)
	})
	return fut
}
