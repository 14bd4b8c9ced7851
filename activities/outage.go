package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// Heartbeater records an activity's heartbeat by its task token: the
// worker's Temporal client (client.Client has the method).
type Heartbeater interface {
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...interface{}) error
}

// outagePeriod is how often a tool riding out an outage asks the server.
const outagePeriod = 2 * time.Second

// rideOutOutages is the context a running tool is bound to: the
// activity's, except that a heartbeat the server could not be reached for
// does not stop the tool. (The SDK gives up on a heartbeat within its
// throttle interval, seconds, and cancels the activity, so a short server
// restart killed every running tool: docs/workflow.md promises a restart
// loses nothing.) The tool then keeps running while capflow heartbeats on
// its own: an attempt the server still knows goes on and completes as
// usual; one the server timed out or cancelled meanwhile is stopped when
// the server says so. stop ends the watch. A tool that ends while the
// server is away has its end held until the server answers
// (temporalx.HoldActivityEnds, on the worker's client).
func (a *Activities) rideOutOutages(ctx context.Context, details func() any) (tctx context.Context, stop func()) {
	base, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	tctx, cancelDeadline := base, context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		tctx, cancelDeadline = context.WithDeadline(base, dl)
	}
	done := make(chan struct{})
	go a.watchOutage(ctx, done, cancel, details)
	return tctx, func() {
		close(done)
		cancelDeadline()
		cancel(nil)
	}
}

// watchOutage passes the activity's cancellation on to the tool, unless
// its cause is a heartbeat that could not reach the server: then it
// heartbeats until the server answers.
func (a *Activities) watchOutage(ctx context.Context, done <-chan struct{}, cancel context.CancelCauseFunc, details func() any) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The tool's context has the same deadline: it ends as a timeout.
		// Cancelling it here could win that race, and a timed-out attempt
		// would end cancelled, unrecorded (TestLocalStepTimesOut, 1 in 3
		// on a loaded machine).
		return
	}
	cause := context.Cause(ctx)
	if a.Heartbeats == nil || !errors.Is(ctx.Err(), context.Canceled) || attemptEnded(cause) || !unreachable(cause) {
		cancel(cause)
		return
	}
	info := activity.GetInfo(ctx)
	a.Logger.Warn("a heartbeat did not reach the Temporal server: the tool keeps running until the server answers",
		"workflow_id", info.WorkflowExecution.ID, "activity_id", info.ActivityID, "error", cause)
	every(outagePeriod, done, func() bool {
		err := a.beat(info.TaskToken, details())
		if err != nil && attemptEnded(err) {
			a.Logger.Warn("the server ended the attempt while it was unreachable: stopping the tool",
				"workflow_id", info.WorkflowExecution.ID, "activity_id", info.ActivityID, "error", err)
			cancel(fmt.Errorf("the server ended this attempt: %w", err))
			return false
		}
		return true
	})
}

// attemptEnded reports whether the server says the attempt is over: it
// was cancelled, paused or reset, or the server no longer knows it (timed
// out).
func attemptEnded(err error) bool {
	var canceled *temporal.CanceledError
	var notFound *serviceerror.NotFound
	var nsInactive *serviceerror.NamespaceNotActive
	var nsMissing *serviceerror.NamespaceNotFound
	return errors.As(err, &canceled) || errors.As(err, &notFound) || errors.As(err, &nsInactive) || errors.As(err, &nsMissing) ||
		errors.Is(err, activity.ErrActivityPaused) || errors.Is(err, activity.ErrActivityReset)
}

// unreachable reports whether a heartbeat failed for want of a server
// (unavailable, timed out, overloaded), as the SDK's retryable errors are.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var svc serviceerror.ServiceError
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &svc) && !attemptEnded(err)
}

// beat records a heartbeat through the worker's client, waiting at most
// outagePeriod for the server.
func (a *Activities) beat(token []byte, details any) error {
	ctx, cancel := context.WithTimeout(context.Background(), outagePeriod)
	defer cancel()
	return a.Heartbeats.RecordActivityHeartbeat(ctx, token, details)
}
