package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// The fast path (docs/performance.md): steps whose tool runs as a local
// activity, and capflow's own Resolve, Route and Finalize, run inside the
// workflow task of the worker that runs the workflow, with no task
// hand-off through the server. Runs recorded before it replay as they ran
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

// Execution paths, as a step's result reports them.
const (
	PathLocal    = "local"
	PathActivity = "activity"
	// PathLocalThenActivity: local attempts failed (or the workflow ran on
	// another host than the run's), the rest ran as a regular activity.
	PathLocalThenActivity = "local, then activity"
)

// LocalFlush is how many local steps may end within one workflow task:
// their results are recorded as markers when the task completes, so past
// it the scheduler yields (a 1 ms timer) to keep each task's completion,
// and the history's growth between segment checks, bounded.
const LocalFlush = wfapi.DefaultLocalFlush

// flushLocal yields when the local steps that ended in this workflow task
// reached LocalFlush, or their inline results the run's InlineFlushBytes.
// A new workflow task shows as a longer history: its markers are in.
func (s *dispatcher) flushLocal() {
	if s.flushDue() && s.ctx.Err() == nil {
		_ = workflow.Sleep(s.ctx, time.Millisecond)
		s.seenLen = -1 // a new task, even where the history length stands still (tests)
		s.taskBegan()
	}
}

// taskBegan clears what the dispatcher counts per workflow task when a new
// task began (the history grew: the last one's markers are in).
func (s *dispatcher) taskBegan() {
	if l := workflow.GetInfo(s.ctx).GetCurrentHistoryLength(); l != s.seenLen {
		s.seenLen, s.localDone, s.inlineDone, s.inlineBytes, s.inlineSpent, s.inlineFull, s.eagerSent = l, 0, 0, 0, 0, false, 0
	}
}

// flushDue reports whether this workflow task has recorded what one task
// may: flushLocal then yields.
func (s *dispatcher) flushDue() bool {
	s.taskBegan()
	return s.localDone >= orDefault(s.rr.LocalFlush, LocalFlush) || s.inlineDue()
}

// inlineDue reports whether this task's inline steps used its budget:
// starting more of them waits for flushLocal. It reads the counts as they
// stand (no new task is looked for): runs with no inline steps start steps
// exactly as they did before inline steps existed.
func (s *dispatcher) inlineDue() bool {
	return s.inlineFull || (s.inlineDone > 0 && s.inlineBytes >= orDefault(s.rr.InlineFlushBytes, wfapi.DefaultInlineFlushBytes))
}

// historyLength is the history's length counting the markers of local
// and inline steps that ended in this workflow task (not in it yet).
func (s *dispatcher) historyLength() int {
	return workflow.GetInfo(s.ctx).GetCurrentHistoryLength() + s.localDone + s.inlineDone
}

// segmentFull reports whether the history reached the run's recorded
// segment length or size (docs/limits.md). An inline step counts as an
// event, as a local step's marker does: a batch is one marker, but every
// step it holds goes into the segment's checkpoint.
func (s *scheduler) segmentFull() bool {
	if s.rr.SegmentEvents > 0 && s.historyLength()+s.inlineSteps >= s.rr.SegmentEvents {
		return true
	}
	// Bytes this segment added: its start (reloaded pages, the carry) may
	// already be megabytes, and a segment must make progress.
	return s.rr.SegmentBytes > 0 && workflow.GetInfo(s.ctx).GetCurrentHistorySize()-s.baseSize >= s.rr.SegmentBytes
}

// runTool runs a step's (or an item's) RunTool: a local activity when the
// step is local and the run uses local activities, else a regular
// activity with opts (its first attempt eager when the run asked: eager.go).
// A local activity that lands on a worker that is not the run's host, or
// whose attempts fail with attempts left, continues as a regular activity.
// ctx may be cancellable; path gets the path taken.
func (s *dispatcher) runTool(ctx workflow.Context, step wfapi.ResolvedStep, opts workflow.ActivityOptions, in wfapi.RunToolInput, path *string) workflow.Future {
	if f, ok := s.inline(ctx, step, opts, in, path); ok {
		return f
	}
	if !s.local || !step.Local {
		opts = s.withinDeadline(opts, false)
		*path = PathActivity
		if s.eager(opts, in) {
			return s.runEager(ctx, step, opts, in)
		}
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), wfapi.RunToolActivity, in)
	}
	return s.runLocal(ctx, step, opts, in, path)
}

// runLocal runs a local step's RunTool as a local activity, continuing as
// a regular one when it landed on another host or its local attempts
// failed with attempts left.
func (s *dispatcher) runLocal(ctx workflow.Context, step wfapi.ResolvedStep, opts workflow.ActivityOptions, in wfapi.RunToolInput, path *string) workflow.Future {
	*path = PathLocal
	opts = s.withinDeadline(opts, true)
	in.Host = s.rr.HostQueue
	retry := *opts.RetryPolicy
	retry.MaximumAttempts = int32(min(max(step.MaxAttempts, 1), orDefault(s.rr.LocalAttempts, LocalAttempts)))
	lopts := workflow.LocalActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, ScheduleToCloseTimeout: opts.ScheduleToCloseTimeout,
		RetryPolicy: &retry, Summary: opts.Summary}
	if lopts.ScheduleToCloseTimeout == 0 {
		// The SDK bounds all local attempts by one timeout when none is
		// given: the first that timed out was the last (issue 54).
		lopts.ScheduleToCloseTimeout = localBudget(retry, opts.StartToCloseTimeout)
	}
	lf := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lopts), wfapi.RunToolActivity, in)
	return s.thenRegular(ctx, lf, then{step: step, opts: opts, in: in, tried: retry.MaximumAttempts, path: path, local: true})
}

// then is how a step whose first attempts were local (or eager) goes on.
type then struct {
	step  wfapi.ResolvedStep
	opts  workflow.ActivityOptions // the regular activity's
	in    wfapi.RunToolInput
	tried int32 // attempts the first activity was allowed
	path  *string
	local bool // the first was a local activity (else an eager one)
}

// thenRegular waits for a step's first activity f and, when it landed on
// another host than the run's, or failed with attempts left, runs the
// rest as a regular activity (t.opts).
func (s *dispatcher) thenRegular(ctx workflow.Context, f workflow.Future, t then) workflow.Future {
	fut, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		var out wfapi.RunToolResult
		err := f.Get(gctx, &out)
		if t.local {
			s.localDone++
		}
		wrong := isWrongHost(err)
		left := max(t.step.MaxAttempts, 1) - int(t.tried)
		// Past the run's deadline (its clamp is what timed the local
		// attempt out), nothing goes on as a regular activity (version 2).
		late := s.deadlineV >= 2 && s.pastDeadline(0)
		if wrong && !t.local && ctx.Err() != nil {
			// Refused while the step was being stopped: it never ran.
			err = temporal.NewCanceledError()
		}
		if err == nil || ctx.Err() != nil || late || (!wrong && (left <= 0 || !retryable(err))) {
			set.Set(out, localTimeout(err, t))
			return
		}
		in, ropts := t.in, t.opts
		in.Host = ""
		if t.local {
			*t.path = PathLocalThenActivity
		} else {
			// The host's own activity ('@': no step ID has one, so no
			// other step's activity can have this ID).
			ropts.ActivityID += wire.OnHostSuffix
		}
		if !wrong {
			in.AttemptsBefore = t.tried
			if t.local {
				r := *t.opts.RetryPolicy
				r.MaximumAttempts = int32(left)
				ropts.RetryPolicy = &r
				ropts.ActivityID += "-after-local"
				if versionOf(gctx, changeLocalBackoff) >= 1 {
					// The back-off goes on where the local attempts left it.
					var wait time.Duration
					ropts.RetryPolicy, wait = afterAttempts(*t.opts.RetryPolicy, t.tried, left)
					_ = workflow.Sleep(gctx, wait)
				}
			} else {
				var wait time.Duration
				ropts.RetryPolicy, wait = afterFirst(*t.opts.RetryPolicy, left)
				_ = workflow.Sleep(gctx, wait)
			}
		}
		var again wfapi.RunToolResult
		err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ropts), wfapi.RunToolActivity, in).Get(gctx, &again)
		set.Set(again, err)
	})
	return fut
}

// localSlack is what each local attempt may take beyond its timeout for
// its start and its report: without it the last attempt meets the shared
// bound before its own and ends cancelled, not timed out.
const localSlack = time.Second

// localBudget bounds a local step's local attempts together: each its
// timeout and slack, and the waits between them its retry policy gives.
func localBudget(r temporal.RetryPolicy, timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 0
	}
	budget := time.Duration(r.MaximumAttempts) * (timeout + localSlack)
	for n := int32(1); n < r.MaximumAttempts; n++ {
		_, wait := afterAttempts(r, n, 0)
		budget += wait
	}
	return budget
}

// localTimeout is the error of a local step whose every local attempt
// timed out: a timeout that says how many attempts ran (a local activity's
// timeout carries no heartbeat, so the step said 1), which the step's
// decode reads as any timeout's last heartbeat.
func localTimeout(err error, t then) error {
	var timeout *temporal.TimeoutError
	if !t.local || !errors.As(err, &timeout) || timeout.HasLastHeartbeatDetails() {
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

// retryable reports whether a failed attempt may be tried again: not a
// cancellation, not an error the tool marked final.
func retryable(err error) bool {
	if temporal.IsCanceledError(err) {
		return false
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return !app.NonRetryable() && !slices.Contains(caperr.NonRetryable(), app.Type())
	}
	return true
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

// orDefault is a value the run recorded, or the workflow's default for
// runs recorded before it was.
func orDefault(recorded, def int) int {
	if recorded > 0 {
		return recorded
	}
	return def
}
