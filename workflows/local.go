package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// The fast path (docs/performance.md): steps whose tool runs as a local
// activity, and capflow's own Resolve, Route and Finalize, run on the
// worker that runs the workflow, beside its workflow task (not in workflow
// code), with no task hand-off through the server. Runs recorded before it replay as they ran
// (changeLocal).

// withLocal records in ctx whether this run uses local activities (asked
// once, at the start of the workflow).
func withLocal(ctx workflow.Context) workflow.Context {
	return workflow.WithValue(ctx, localKey{}, versionOf(ctx, changeLocal) >= 1)
}

type localKey struct{}

// usesLocal reports what withLocal recorded.
func usesLocal(ctx workflow.Context) bool {
	v, _ := ctx.Value(localKey{}).(bool)
	return v
}

// LocalAttempts is how many attempts a local step makes as a local
// activity (the SDK's local retry) before its remaining attempts run as a
// regular activity, which heartbeats and shows in the Web UI's pending
// activities.
const LocalAttempts = wfapi.DefaultLocalAttempts

// localWay runs a unit as local activities on the workflow's worker (up to
// the run's localAttempts), going on as a regular activity when it landed
// on another host or its local attempts failed with attempts left. done
// counts the local units that ended in this workflow task (task.go).
type localWay struct{ done int }

func (l *localWay) newTask() { l.done = 0 }

func (l *localWay) start(d *dispatcher, u unit) workflow.Future {
	*u.path = PathLocal
	opts := d.withinDeadline(u.opts, true)
	in := u.in
	in.Host = d.rr.HostQueue
	retry := *opts.RetryPolicy
	retry.MaximumAttempts = firstAttempts(wayLocal, u.step.MaxAttempts, d.p.localAttempts)
	lopts := workflow.LocalActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, ScheduleToCloseTimeout: opts.ScheduleToCloseTimeout,
		RetryPolicy: &retry, Summary: opts.Summary}
	if lopts.ScheduleToCloseTimeout == 0 {
		// The SDK bounds all local attempts by one timeout when none is
		// given: the first that timed out was the last (issue 54).
		lopts.ScheduleToCloseTimeout = localBudget(retry, opts.StartToCloseTimeout)
	}
	if d.leave != nil && retriesOutside(retry, workflow.GetInfo(d.ctx).WorkflowTaskTimeout) {
		d.leave()
	}
	lf := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(u.ctx, lopts), wfapi.RunToolActivity, in)
	return d.thenRegular(lf, then{unit: unit{ctx: u.ctx, step: u.step, opts: opts, in: in, path: u.path}, tried: retry.MaximumAttempts, first: wayLocal})
}

// localTimeout is the error of a local step whose every local attempt
// timed out: a timeout that says how many attempts ran (a local activity's
// timeout carries no heartbeat, so the step said 1), which the step's
// decode reads as any timeout's last heartbeat.
func localTimeout(err error, t then) error {
	var timeout *temporal.TimeoutError
	if t.first != wayLocal || !errors.As(err, &timeout) || timeout.HasLastHeartbeatDetails() {
		return err
	}
	return temporal.NewTimeoutError(timeout.TimeoutType(), timeout.Unwrap(), wfapi.Heartbeat{Attempt: t.tried, MaxAttempts: int32(max(t.step.MaxAttempts, 1))})
}

// isWrongHost reports whether a local activity found itself on a worker
// that is not the run's host.
func isWrongHost(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == wfapi.ErrWrongHost
}

// bookkeeping runs one of capflow's own activities (Resolve, Route,
// Finalize): locally when the run uses local activities, falling back to
// a regular activity with opts when the local one landed on a worker that
// is not the run's host (Finalize writes the run's folder).
func bookkeeping(ctx workflow.Context, local bool, opts workflow.ActivityOptions, name string, in, out any) error {
	if local {
		lopts := workflow.LocalActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, RetryPolicy: opts.RetryPolicy, Summary: opts.Summary}
		if lopts.StartToCloseTimeout == 0 {
			lopts.StartToCloseTimeout = 5 * time.Minute
		}
		err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lopts), name, in).Get(ctx, out)
		if !isWrongHost(err) {
			return err
		}
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), name, in).Get(ctx, out)
}
