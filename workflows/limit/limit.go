// Package limit is the workflow that keeps one limit of a tool or a
// capability (max_concurrent, rate) for every run and worker: steps'
// activities acquire, renew and release their slots with it
// (activities/slots.go). It shares nothing with the plan workflow but the
// wire (internal/wfapi) and the one change list.
package limit

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// Workflow keeps one limit (a tool's or a capability's, per key
// value) for every run and worker (wfapi.LimitWorkflowType): the holders
// with their leases, a FIFO queue of waiters with theirs, and the
// earliest time the rate lets the next one start. Its handlers never
// wait: acquire answers held or queued at once, and the slots are granted
// here, in order, as they come free. It continues as new past limitEvents
// carrying all of it, and ends once idle for limitIdle.
func Workflow(ctx workflow.Context, st wfapi.LimitState) error {
	l := &limit{st: st, strict: versionOf(ctx, ChangeTrust) >= 1}
	if l.st.Holders == nil {
		l.st.Holders = map[string]time.Time{}
	}
	if l.st.LetGo == nil {
		l.st.LetGo = map[string]time.Time{}
	}
	// Any client of the namespace may send: what no attempt of capflow's
	// would send is refused before it is recorded.
	if err := workflow.SetUpdateHandlerWithOptions(ctx, wfapi.LimitAcquireUpdate, l.acquire,
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, req wfapi.LimitRequest) error { return req.Check() }}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, wfapi.LimitHoldsQuery, l.holds); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, wfapi.LimitPlaceQuery, l.place); err != nil {
		return err
	}
	release := workflow.GetSignalChannel(ctx, wfapi.LimitReleaseSignal)
	renew := workflow.GetSignalChannel(ctx, wfapi.LimitRenewSignal)
	var t limitTimer
	var idleSince time.Time
	for {
		now := workflow.Now(ctx)
		l.drain(now, release, renew)
		l.expire(now)
		l.grant(now)
		if workflow.GetInfo(ctx).GetCurrentHistoryLength() > limitEvents {
			l.drain(now, release, renew)
			return workflow.NewContinueAsNewError(ctx, wfapi.LimitWorkflowType, l.st)
		}
		wake := l.wake(now)
		switch {
		case !l.idle(now):
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = now
			wake = now.Add(limitIdle)
		case !now.Before(idleSince.Add(limitIdle)):
			return nil
		default:
			wake = idleSince.Add(limitIdle)
		}
		fired := t.set(ctx, now, wake)
		gen := l.gen
		_ = workflow.Await(ctx, func() bool { return l.gen != gen || release.Len() > 0 || renew.Len() > 0 || fired() })
	}
}

const (
	// limitEvents: a limit's history continues as new past it.
	limitEvents = 2000
	// limitIdle: a limit nobody holds or waits for ends after it.
	limitIdle = 10 * time.Minute
)

type limit struct {
	st  wfapi.LimitState
	gen int // bumped by every change the main loop waits for
	// strict (changeLimitTrust): leases are held within their bounds, and
	// a renewal makes a holder of one the limit let go, nobody else.
	strict bool
}

// letGoFor is how long a holder let go may hold again by a renewal, and
// maxLetGo how many are kept (the oldest go first).
const (
	letGoFor = 24 * time.Hour
	maxLetGo = 1000
)

// oldest is the holder let go first (by name among equals: deterministic).
func oldest(letGo map[string]time.Time) string {
	first := ""
	//workflowcheck:ignore
	for h, at := range letGo {
		if first == "" || at.Before(letGo[first]) || at.Equal(letGo[first]) && h < first {
			first = h
		}
	}
	return first
}

// lease is a requested lease as the limit keeps it.
func (l *limit) lease(d time.Duration) time.Duration {
	if l.strict {
		return wfapi.LimitLease(d)
	}
	return max(d, wfapi.MinLimitLease)
}

// acquire answers at once: held (the slot is the holder's, its lease
// starts again) or queued (it asks the holds query, and renews its place).
func (l *limit) acquire(ctx workflow.Context, req wfapi.LimitRequest) (string, error) {
	now := workflow.Now(ctx)
	if l.strict {
		// While it runs, a limit only tightens: a request cannot lift it
		// (a client's concurrency 0 would have let every waiter start);
		// a manifest loosened holds once the limit has ended, idle.
		l.st.Concurrency, l.st.Interval = tighter(l.st.Concurrency, req.Concurrency), max(l.st.Interval, req.Interval)
	} else {
		l.st.Concurrency, l.st.Interval = req.Concurrency, req.Interval // the limit as declared now
	}
	lease := l.lease(req.Lease)
	l.gen++
	if _, held := l.st.Holders[req.Holder]; held {
		l.st.Holders[req.Holder] = now.Add(lease)
		return wfapi.LimitHeld, nil
	}
	if i := l.queued(req.Holder); i >= 0 {
		l.st.Queue[i].Until = now.Add(lease)
		return wfapi.LimitQueued, nil
	}
	l.st.Queue = append(l.st.Queue, wfapi.LimitWaiter{Holder: req.Holder, Until: now.Add(lease), Lease: lease})
	l.expire(now)
	l.grant(now)
	return l.holds(req.Holder)
}

// tighter is the lower of two concurrencies, 0 being none.
func tighter(a, b int) int {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// holds says whether holder holds a slot, waits for one, or is unknown.
func (l *limit) holds(holder string) (string, error) {
	if _, held := l.st.Holders[holder]; held {
		return wfapi.LimitHeld, nil
	}
	if l.queued(holder) >= 0 {
		return wfapi.LimitQueued, nil
	}
	return wfapi.LimitUnknown, nil
}

// place is holder's place: 0 holding, n >= 1 queued n-th, -1 unknown.
func (l *limit) place(holder string) (int, error) {
	if _, held := l.st.Holders[holder]; held {
		return 0, nil
	}
	if i := l.queued(holder); i >= 0 {
		return i + 1, nil
	}
	return -1, nil
}

func (l *limit) queued(holder string) int {
	return slices.IndexFunc(l.st.Queue, func(w wfapi.LimitWaiter) bool { return w.Holder == holder })
}

// grant gives the free slots to the first waiters, as the rate allows.
func (l *limit) grant(now time.Time) {
	for len(l.st.Queue) > 0 {
		free := l.st.Concurrency <= 0 || len(l.st.Holders) < l.st.Concurrency
		if !free || now.Before(l.st.Next) {
			return
		}
		w := l.st.Queue[0]
		l.st.Queue = l.st.Queue[1:]
		l.st.Holders[w.Holder] = now.Add(w.Lease)
		if l.st.Interval > 0 {
			l.st.Next = now.Add(l.st.Interval)
		}
		l.gen++
	}
}

// drain applies the releases and renewals received. A holder let go (its
// lease ran out while its tool ran on: a long server outage) holds again
// on its renewal, even past the concurrency: its tool runs.
func (l *limit) drain(now time.Time, release, renew workflow.ReceiveChannel) {
	var holder string
	for release.ReceiveAsync(&holder) {
		delete(l.st.Holders, holder)
		if i := l.queued(holder); i >= 0 {
			l.st.Queue = slices.Delete(l.st.Queue, i, i+1)
		}
		l.gen++
	}
	var req wfapi.LimitRenew
	for renew.ReceiveAsync(&req) {
		lease := l.lease(req.Lease)
		_, letGo := l.st.LetGo[req.Holder]
		if _, held := l.st.Holders[req.Holder]; held || req.Held && (letGo || !l.strict) {
			l.st.Holders[req.Holder] = now.Add(lease)
			delete(l.st.LetGo, req.Holder)
		} else if i := l.queued(req.Holder); i >= 0 {
			l.st.Queue[i].Until = now.Add(lease)
		}
	}
}

// expire frees the slots and places whose lease ran out: their worker is
// gone.
func (l *limit) expire(now time.Time) {
	// The set of expired holders, whatever the order: deterministic.
	//workflowcheck:ignore
	for h, end := range l.st.Holders {
		if !now.Before(end) {
			delete(l.st.Holders, h)
			if l.strict {
				l.st.LetGo[h] = now
			}
			l.gen++
		}
	}
	// Those let go long ago, whatever the order: deterministic.
	//workflowcheck:ignore
	for h, at := range l.st.LetGo {
		if now.Sub(at) > letGoFor {
			delete(l.st.LetGo, h)
		}
	}
	for len(l.st.LetGo) > maxLetGo {
		delete(l.st.LetGo, oldest(l.st.LetGo))
	}
	l.st.Queue = slices.DeleteFunc(l.st.Queue, func(w wfapi.LimitWaiter) bool { return !now.Before(w.Until) })
}

// idle: nobody holds or waits, and the rate forgets nothing by ending.
func (l *limit) idle(now time.Time) bool {
	return len(l.st.Holders) == 0 && len(l.st.Queue) == 0 && !now.Before(l.st.Next)
}

// wake is when the limit must look again by itself: the first lease to
// run out, or the rate's next start (zero: never).
func (l *limit) wake(now time.Time) time.Time {
	var first time.Time
	earlier := func(t time.Time) {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	// The earliest, whatever the order: deterministic.
	//workflowcheck:ignore
	for _, end := range l.st.Holders {
		earlier(end)
	}
	for _, w := range l.st.Queue {
		earlier(w.Until)
	}
	if now.Before(l.st.Next) {
		earlier(l.st.Next)
	}
	return first
}

// limitTimer is the limit's one timer, replaced only when it must wake
// sooner (a renewal moves no timer): each timer costs history events, and
// a condition that wins does not cancel AwaitWithTimeout's.
type limitTimer struct {
	at     time.Time
	f      workflow.Future
	cancel workflow.CancelFunc
}

// set makes the timer fire at wake (zero: none needed), and returns
// whether it fired.
func (t *limitTimer) set(ctx workflow.Context, now, wake time.Time) func() bool {
	ready := func() bool { return t.f != nil && t.f.IsReady() }
	if wake.IsZero() {
		return func() bool { return false } // a pending timer may fire: nothing waits for it
	}
	if t.f != nil && !ready() && !wake.Before(t.at) {
		return ready
	}
	if t.cancel != nil && !ready() {
		t.cancel()
	}
	tctx, cancel := workflow.WithCancel(ctx)
	t.at, t.cancel = wake, cancel
	t.f = workflow.NewTimer(tctx, max(wake.Sub(now), time.Millisecond))
	return ready
}
