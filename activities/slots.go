package activities

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// Slots keeps tools' and capabilities' limits with a LimitWorkflow per
// limit and key value (workflows/limit.go) on the worker's task queue:
// step.Slots.
type Slots struct {
	Client client.Client
	Queue  string

	owners sync.Map // limit workflow ID -> true, once its owner was checked
}

// Take asks the limit's workflow for a slot (starting it when none runs);
// queued, it asks again with growing pauses until the slot is its. While
// it waits or holds, its lease is renewed; the function returned gives the
// slot back. A cancelled wait leaves the queue: the step takes nothing.
func (s *Slots) Take(ctx context.Context, req step.SlotRequest) (func(), error) {
	id := wfapi.LimitWorkflowID(s.Queue, req.Scope, req.Key)
	lease := wfapi.LimitLease(req.Lease)
	if err := s.checkOwner(ctx, id); err != nil {
		return nil, err
	}
	lr := wfapi.LimitRequest{Holder: req.Holder, Concurrency: req.Limits.Concurrency, Interval: req.Limits.Interval(), Lease: lease}
	label := req.Scope
	if k := req.Limits.KeyInput(); k != "" {
		label += " per " + k
	}
	var held atomic.Bool
	done, renewed := make(chan struct{}), make(chan struct{})
	release := func() {
		// The renewals end before the release goes: a renewal after it
		// would make the holder hold again (as one let go by an outage).
		close(done)
		<-renewed
		s.signal(id, wfapi.LimitReleaseSignal, req.Holder)
	}
	go func() {
		defer close(renewed)
		s.renew(done, id, wfapi.LimitRenew{Holder: req.Holder, Lease: lease}, &held)
	}()
	state, err := s.acquire(ctx, id, label, lr)
	place := 1
	for pause := 50 * time.Millisecond; err == nil && state != wfapi.LimitHeld; pause = waitFor(place) {
		if state == wfapi.LimitQueued && req.Queued != nil {
			req.Queued()
			req.Queued = nil
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
			continue
		case <-time.After(pause):
		}
		if place, err = s.place(ctx, id, req.Holder); err == nil {
			state = placeState(place)
			if state == wfapi.LimitUnknown {
				// Its place ran out (renewals did not reach the limit): ask again.
				state, err = s.acquire(ctx, id, label, lr)
			}
		}
	}
	if err != nil {
		release()
		return nil, err
	}
	held.Store(true)
	return release, nil
}

// maxPoll is the longest pause of a queued attempt between two asks (a
// query costs no history, but a workflow task of the limit's worker).
const maxPoll = 2 * time.Second

// waitFor is the pause before a waiter at place asks again: the next in
// line asks often (a freed slot waits little for it), one far back
// seldom: a hundred waiters ask a few dozen times a second, not hundreds.
func waitFor(place int) time.Duration {
	return jittered(min(time.Duration(max(place, 1))*75*time.Millisecond, maxPoll))
}

// placeState is what a place says: held, queued or unknown.
func placeState(place int) string {
	switch {
	case place == 0:
		return wfapi.LimitHeld
	case place > 0:
		return wfapi.LimitQueued
	}
	return wfapi.LimitUnknown
}

// jittered is d, give or take a quarter: waiters that began together do
// not ask together.
func jittered(d time.Duration) time.Duration {
	return d - d/4 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// checkOwner makes sure the workflow at a limit's ID is a limit of this
// project's, once per ID and process: anything else there (another type,
// another queue: a client took the ID) would take the step's requests
// and answer none of them.
func (s *Slots) checkOwner(ctx context.Context, id string) error {
	if _, ok := s.owners.Load(id); ok {
		return nil
	}
	d, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return nil // none yet: acquire starts it
	case err != nil:
		return nil // acquire will say what the server says
	}
	info := d.GetWorkflowExecutionInfo()
	typ, queue := info.GetType().GetName(), info.GetTaskQueue()
	open := info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	if open && (typ != wfapi.LimitWorkflowType || queue != s.Queue) {
		return caperr.New(caperr.ConfigError, "the limit's workflow ID %s is taken by a %s workflow on task queue %q, not by capflow's limit on %q: end it (temporal workflow terminate -w %q) and the step can take a slot",
			id, typ, queue, s.Queue, id)
	}
	s.owners.Store(id, true)
	return nil
}

// acquireWait bounds one acquire's wait for its answer.
const acquireWait = 10 * time.Second

// acquire asks for the slot, starting the limit's workflow when none runs;
// a transient failure (the server busy or away, the workflow between two
// runs) is asked again with growing pauses.
func (s *Slots) acquire(ctx context.Context, id, label string, lr wfapi.LimitRequest) (string, error) {
	var state string
	err := transient(ctx, func() error {
		// A limit answers at once: one that does not answer in acquireWait
		// may not be a limit of this project's any more (a client took
		// its ID since it was checked).
		cctx, cancel := context.WithTimeout(ctx, acquireWait)
		defer cancel()
		start := s.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: id, TaskQueue: s.Queue,
			WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, StaticSummary: "limit: " + label},
			wfapi.LimitWorkflowType, wfapi.LimitState{Label: label})
		h, err := s.Client.UpdateWithStartWorkflow(cctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{UpdateName: wfapi.LimitAcquireUpdate, Args: []any{lr}, WaitForStage: client.WorkflowUpdateStageCompleted}})
		if err == nil {
			err = h.Get(cctx, &state)
		}
		if err != nil && cctx.Err() != nil && ctx.Err() == nil {
			s.owners.Delete(id)
			if oerr := s.checkOwner(ctx, id); oerr != nil {
				return oerr
			}
		}
		return err
	})
	return state, err
}

// place asks the limit for the holder's place (placeState); a limit of
// an earlier capflow, which knows no place query, answers holds.
func (s *Slots) place(ctx context.Context, id, holder string) (int, error) {
	place := -1
	err := transient(ctx, func() error {
		v, err := s.Client.QueryWorkflow(ctx, id, "", wfapi.LimitPlaceQuery, holder)
		if err == nil {
			return v.Get(&place)
		}
		var nf *serviceerror.NotFound
		var qf *serviceerror.QueryFailed
		switch {
		case errors.As(err, &nf):
			place, err = -1, nil // ended, or between two runs: ask again
		case errors.As(err, &qf) && strings.Contains(qf.Message, "unknown queryType"):
			var state string
			if v, err = s.Client.QueryWorkflow(ctx, id, "", wfapi.LimitHoldsQuery, holder); err == nil {
				err = v.Get(&state)
			}
			switch state {
			case wfapi.LimitHeld:
				place = 0
			case wfapi.LimitQueued:
				place = 1
			default:
				place = -1
			}
		}
		return err
	})
	return place, err
}

// renew renews the lease every third of it until done.
func (s *Slots) renew(done <-chan struct{}, id string, r wfapi.LimitRenew, held *atomic.Bool) {
	every(r.Lease/3, done, func() bool {
		r.Held = held.Load()
		s.signal(id, wfapi.LimitRenewSignal, r)
		return true
	})
}

// signal tells the limit's workflow, whatever the attempt's context: a
// release must reach it after a cancellation too. One that does not (the
// server unreachable) leaves the slot to its lease.
func (s *Slots) signal(id, name string, arg any) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Client.SignalWorkflow(ctx, id, "", name, arg)
}

// transient runs call until it succeeds, fails for good, or ctx ends: the
// server's own refusals of the moment (busy, unavailable, a workflow that
// ended or continued as new under the call) are asked again with growing
// pauses; anything else is the step's failure.
func transient(ctx context.Context, call func() error) error {
	for pause := 100 * time.Millisecond; ; pause = min(2*pause, 5*time.Second) {
		err := call()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("the limit's workflow: %w", err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

func retryable(err error) bool {
	var (
		busy    *serviceerror.ResourceExhausted
		away    *serviceerror.Unavailable
		gone    *serviceerror.NotFound
		closing *serviceerror.WorkflowNotReady
		ended   *serviceerror.AlreadyExists
	)
	var (
		slow     *serviceerror.DeadlineExceeded
		canceled *serviceerror.Canceled
	)
	// A call's own deadline passed (the limit busy with a crowd of
	// waiters): the attempt's context, checked first, has not.
	return errors.As(err, &busy) || errors.As(err, &away) || errors.As(err, &gone) || errors.As(err, &closing) || errors.As(err, &ended) ||
		errors.As(err, &slow) || errors.As(err, &canceled) || errors.Is(err, context.DeadlineExceeded)
}
