package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// LimitWorkflow keeps one limit of a tool (per key value) for every run
// and worker (wfapi.LimitWorkflowType): a FIFO queue of attempts waiting
// for a slot, the holders with their leases, and the earliest time the
// rate lets the next one start. It continues as new past limitEvents
// (waiting attempts ask again) and ends once idle for limitIdle.
func LimitWorkflow(ctx workflow.Context, st wfapi.LimitState) error {
	l := &limit{ctx: ctx, holders: st.Holders, next: st.Next}
	if l.holders == nil {
		l.holders = map[string]time.Time{}
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, wfapi.LimitAcquireUpdate, l.acquire,
		workflow.UpdateHandlerOptions{UnfinishedPolicy: workflow.HandlerUnfinishedPolicyAbandon})
	if err != nil {
		return err
	}
	release := workflow.GetSignalChannel(ctx, wfapi.LimitReleaseSignal)
	renew := workflow.GetSignalChannel(ctx, wfapi.LimitRenewSignal)
	for {
		l.drain(release, renew)
		now := workflow.Now(ctx)
		l.expire(now)
		if workflow.GetInfo(ctx).GetCurrentHistoryLength() > limitEvents {
			l.drain(release, renew)
			st.Holders, st.Next = l.holders, l.next
			return workflow.NewContinueAsNewError(ctx, wfapi.LimitWorkflowType, st)
		}
		idle := len(l.holders) == 0 && len(l.queue) == 0
		wait := limitIdle
		if !idle {
			wait = max(l.firstExpiry().Sub(now), time.Millisecond)
		}
		gen := l.gen
		woke, _ := workflow.AwaitWithTimeout(ctx, wait, func() bool {
			return l.gen != gen || release.Len() > 0 || renew.Len() > 0
		})
		if !woke && idle && l.gen == gen {
			return nil
		}
	}
}

const (
	// limitEvents: a limit's history continues as new past it.
	limitEvents = 2000
	// limitIdle: a limit nobody holds or waits for ends after it.
	limitIdle = 10 * time.Minute
)

type limit struct {
	ctx     workflow.Context
	holders map[string]time.Time
	queue   []string
	next    time.Time
	gen     int // bumped by every change a waiter may be waiting for
}

// acquire returns once req's holder has a slot, or fails when it was
// released while it waited (its step was cancelled).
func (l *limit) acquire(ctx workflow.Context, req wfapi.LimitRequest) error {
	if _, held := l.holders[req.Holder]; held {
		return nil // asked again (the caller's retry): it holds it
	}
	l.queue = append(l.queue, req.Holder)
	l.gen++
	defer l.leave(req.Holder)
	for {
		if !slices.Contains(l.queue, req.Holder) {
			return temporal.NewNonRetryableApplicationError("released while waiting for a slot", "Released", nil)
		}
		now := workflow.Now(ctx)
		l.expire(now)
		head := l.queue[0] == req.Holder
		free := req.Concurrency <= 0 || len(l.holders) < req.Concurrency
		if head && free && !now.Before(l.next) {
			l.holders[req.Holder] = now.Add(req.Lease)
			if req.Interval > 0 {
				l.next = now.Add(req.Interval)
			}
			l.gen++
			return nil
		}
		gen := l.gen
		changed := func() bool { return l.gen != gen }
		if !head {
			if err := workflow.Await(ctx, changed); err != nil {
				return err
			}
			continue
		}
		// The head waits for the rate's next start or the first lease's end.
		wake := l.next
		if !free {
			wake = l.firstExpiry()
		}
		if _, err := workflow.AwaitWithTimeout(ctx, max(wake.Sub(now), time.Millisecond), changed); err != nil {
			return err
		}
	}
}

func (l *limit) leave(holder string) {
	if i := slices.Index(l.queue, holder); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
		l.gen++
	}
}

// drain applies the releases and renewals received.
func (l *limit) drain(release, renew workflow.ReceiveChannel) {
	var holder string
	for release.ReceiveAsync(&holder) {
		delete(l.holders, holder)
		l.leave(holder)
		l.gen++
	}
	var req wfapi.LimitRequest
	for renew.ReceiveAsync(&req) {
		if _, held := l.holders[req.Holder]; held {
			l.holders[req.Holder] = workflow.Now(l.ctx).Add(req.Lease)
		}
	}
}

// expire frees the slots whose lease ran out: their worker is gone.
func (l *limit) expire(now time.Time) {
	// The set of expired holders, whatever the order: deterministic.
	//workflowcheck:ignore
	for h, end := range l.holders {
		if !now.Before(end) {
			delete(l.holders, h)
			l.gen++
		}
	}
}

// firstExpiry is the earliest lease end (far ahead with no holder).
func (l *limit) firstExpiry() time.Time {
	first := workflow.Now(l.ctx).Add(limitIdle)
	// The earliest, whatever the order: deterministic.
	//workflowcheck:ignore
	for _, end := range l.holders {
		if end.Before(first) {
			first = end
		}
	}
	return first
}
