package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// Eager steps (temporal.eager_steps, docs/performance.md): a step for the
// run's host makes its first attempt on the workflow's own task queue.
// The Go SDK asks the server to start such an activity on the worker that
// completes the workflow task, and a server with
// system.enableActivityEagerExecution hands it back in that answer: no
// trip through the server's task queues. That worker is the run's host
// while the run's workflow stays there (the host is the worker that
// resolved the run); a worker on another host refuses the attempt
// (ErrWrongHost) and the step runs on the host's queue, as do its further
// attempts.

// eager reports whether a regular step with opts makes its first attempt
// on the workflow's queue: the run asked for it, the step goes to the
// run's host, it has attempts after the first (an attempt a stopped host's
// open poll took from the shared queue only times out: the rest run on the
// host's queue), it is not a for_each item (items are a fan-out: fanOut), and
// this workflow task has not sent as many eager steps as the SDK asks the
// server to start (past them a step would wait on the shared queue for any
// worker). Runs that did not ask record no marker.
func (s *dispatcher) eager(opts workflow.ActivityOptions, in wfapi.RunToolInput) bool {
	if s.rr.EagerSteps <= 0 || s.rr.HostQueue == "" || opts.TaskQueue != s.rr.HostQueue || in.Step.Item != nil || opts.RetryPolicy.MaximumAttempts <= 1 {
		return false
	}
	s.taskBegan()
	if s.eagerSent >= s.rr.EagerSteps {
		return false
	}
	if !s.eagerAsked {
		s.eagerV, s.eagerAsked = versionOf(s.ctx, changeEagerSteps), true
	}
	if s.eagerV < 1 {
		return false
	}
	s.eagerSent++
	return true
}

// fanOut spends this workflow task's eager steps when it starts more
// steps than it may send eagerly (n ready): a fan-out waits on its slowest
// step, not on one hand-off, and its first few started eagerly only bunch
// the workflow tasks their ends bring.
func (s *dispatcher) fanOut(n int) {
	if s.rr.EagerSteps > 0 && n > s.rr.EagerSteps {
		s.taskBegan()
		s.eagerSent = s.rr.EagerSteps
	}
}

// runEager starts a step's first attempt on the workflow's queue (no
// schedule-to-start timeout: the shared queue's wait says nothing of the
// run's host) and goes on on the host's queue when it was refused there or
// failed with attempts left.
func (s *dispatcher) runEager(ctx workflow.Context, step wfapi.ResolvedStep, opts workflow.ActivityOptions, in wfapi.RunToolInput) workflow.Future {
	first := opts
	first.TaskQueue, first.ScheduleToStartTimeout = "", 0
	retry := *opts.RetryPolicy
	retry.MaximumAttempts = 1
	first.RetryPolicy = &retry
	in.Host, in.MaxAttempts = s.rr.HostQueue, int32(max(step.MaxAttempts, 1))
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, first), wfapi.RunToolActivity, in)
	in.MaxAttempts = 0
	return s.thenRegular(ctx, f, then{step: step, opts: opts, in: in, tried: 1})
}

// afterFirst is a step's retry policy for its attempts after a failed
// eager one (left of them), and the wait before the first: the intervals
// go on from the first attempt's (Temporal's default first wait, 1s, when
// the policy names none).
func afterFirst(r temporal.RetryPolicy, left int) (*temporal.RetryPolicy, time.Duration) {
	return afterAttempts(r, 1, left)
}

// afterAttempts is a step's retry policy for its attempts after tried
// failed ones (left of them), and the wait before the next: the wait
// Temporal's policy gives after attempt tried, the intervals going on from
// there (a step whose local attempts failed keeps its back-off when it
// goes on as a regular activity).
func afterAttempts(r temporal.RetryPolicy, tried int32, left int) (*temporal.RetryPolicy, time.Duration) {
	wait := r.InitialInterval
	if wait <= 0 {
		wait = time.Second
	}
	grow := func(d time.Duration) time.Duration {
		if r.BackoffCoefficient <= 1 {
			return d
		}
		d = time.Duration(float64(d) * r.BackoffCoefficient)
		if r.MaximumInterval > 0 {
			d = min(d, r.MaximumInterval)
		}
		return d
	}
	for range tried - 1 {
		wait = grow(wait)
	}
	next := r
	next.MaximumAttempts = int32(left)
	next.InitialInterval = grow(wait)
	return &next, wait
}
