package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// The retry rule of a step's attempts, in one place (pure functions, table
// tests in retry_test.go). How many attempts a step gets is decided
// before the run (preflight.Settings, clamped to the policy and to one for
// a tool that is not idempotent); whether one failure may be retried is
// the tool's code and idempotency (step.Failed.Retryable, the caperr
// table). Here: how those attempts are split between a step's first way
// and the regular activity that goes on from it, the back-off between
// them, and when retries count as exhausted.

// stepRetry is a step's retry policy as its settings give it. No list of
// non-retryable error types: RunTool marks each failure retryable or not
// itself, and the list went with every step's scheduling, stored and read
// by the server each time.
func stepRetry(step wfapi.ResolvedStep) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{InitialInterval: step.InitialInterval, BackoffCoefficient: step.Backoff,
		MaximumInterval: step.MaxInterval, MaximumAttempts: int32(step.MaxAttempts)}
}

// firstAttempts is how many attempts a step's first way makes before the
// rest go on as a regular activity: local ones up to the run's
// localAttempts (they neither heartbeat nor show in the Web UI's pending
// activities), one eager attempt, and all of them otherwise.
func firstAttempts(k wayKind, maxAttempts, localAttempts int) int32 {
	switch k {
	case wayLocal:
		return int32(min(max(maxAttempts, 1), localAttempts))
	case wayEager:
		return 1
	}
	return int32(maxAttempts)
}

// firstEnd is how a step's first way ended.
type firstEnd struct {
	failed    bool // it ended with an error
	wrongHost bool // it landed on a worker that is not the run's host
	stopping  bool // the step is being stopped
	late      bool // the run's deadline passed (and the run clamps to it)
	retryable bool // the failure may be retried (retryable)
	left      int  // attempts the step has after the first way's
}

// goesOn reports whether a step goes on as a regular activity after its
// first way: it failed, nothing stops it, and it landed on the wrong host
// or has attempts left for a failure that may be retried.
func goesOn(e firstEnd) bool {
	return e.failed && !e.stopping && !e.late && (e.wrongHost || (e.left > 0 && e.retryable))
}

// afterAttempts is a step's retry policy for its attempts after tried
// failed ones (left of them), and the wait before the next: the wait
// Temporal's policy gives after attempt tried, the intervals going on from
// there (Temporal's default first wait, 1s, when the policy names none).
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

// continuation is the regular activity's retry policy and the wait before
// it, after tried attempts of the first way failed (left remain). With
// backoff (an eager first attempt; local ones since changeLocalBackoff)
// the back-off goes on where they left it; without, the rest start at once
// from the first interval.
func continuation(r temporal.RetryPolicy, tried int32, left int, backoff bool) (*temporal.RetryPolicy, time.Duration) {
	if backoff {
		return afterAttempts(r, tried, left)
	}
	r.MaximumAttempts = int32(left)
	return &r, 0
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

// retriesOutside reports whether local attempts under r may wait longer
// than a workflow task (task) between them: the SDK then waits on a
// server timer, outside the task.
func retriesOutside(r temporal.RetryPolicy, task time.Duration) bool {
	for n := int32(1); n < r.MaximumAttempts; n++ {
		if _, wait := afterAttempts(r, n, 0); wait > task {
			return true
		}
	}
	return false
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

// exhaustedBy reports whether a failed step used every attempt, when the
// server did not say (the test server does not always, nor a local step's
// timeout): the attempt count does, for a failure that could have been
// retried.
func exhaustedBy(attempts, maxAttempts int, retryable bool) bool {
	return attempts >= maxAttempts && retryable
}
