package step

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
)

// Slots keeps tools' limits (manifest `limits:`) across every run and
// worker: the worker's is Temporal's side (a LimitWorkflow per limit);
// without one (plan tests) limits are not kept.
type Slots interface {
	// Take returns once req's holder has a slot, with the function that
	// gives it back; an error when ctx ended first (nothing taken).
	Take(ctx context.Context, req SlotRequest) (release func(), err error)
}

// SlotRequest is one attempt's request for a slot of a limit.
type SlotRequest struct {
	// Scope names the limit: "tool NAME" or "capability CAP".
	Scope  string
	Limits manifest.Limits
	// Key is the key input's value ("" without a key).
	Key string
	// Holder names the attempt: run, step or item, attempt number.
	Holder string
	// Lease is how long the slot stays the holder's without a renewal:
	// how soon a dead worker's slot comes back.
	Lease time.Duration
	// Queued is called once if the attempt must wait (nil: not told).
	Queued func()
}

// DefaultLease is a slot's lease when the step has no heartbeat timeout.
const DefaultLease = 30 * time.Second

// limitsOf are the limits that hold a step: its capability's
// (capflow.yaml) first, then its tool's (a step takes their slots in that
// order, so two steps never hold one each of the other's).
func (e *Executor) limitsOf(m *manifest.Manifest, capability string) []SlotRequest {
	var out []SlotRequest
	if l, ok := e.Project.Config.Limits[capability]; ok && capability != "" {
		out = append(out, SlotRequest{Scope: "capability " + capability, Limits: l})
	}
	if m.Limits != nil {
		out = append(out, SlotRequest{Scope: "tool " + m.Name, Limits: *m.Limits})
	}
	return out
}

// takeSlots waits for a slot of each limit that holds the step, saying so
// in the step's live feedback while it waits; note is what the step's
// envelope keeps of the wait (nil: it did not wait). release gives back
// what was taken, on an error too.
func (e *Executor) takeSlots(ctx context.Context, r *stepRun, m *manifest.Manifest, inputs any) (release func(), note *envelope.Feedback, err error) {
	var held []func()
	release = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}
	if e.Slots == nil {
		return release, nil, nil
	}
	began := time.Now()
	var what []string
	for _, req := range e.limitsOf(m, r.in.Step.Capability) {
		if f := req.Limits.KeyInput(); f != "" {
			// As JSON: 1 and "1" are two keys; a missing input is "null".
			in, _ := inputs.(map[string]any)
			k, _ := json.Marshal(in[f])
			req.Key = string(k)
		}
		// The holder's name ends in a nonce: a client cannot release or
		// renew it by guessing its step and attempt (one that reads the
		// limit's history can: a namespace is the unit of trust).
		req.Lease, req.Holder = r.at.Lease, fmt.Sprintf("%s/%s/%d/%s", r.in.WorkflowID, label(r.in.Step), r.attempt, nonce())
		if req.Lease <= 0 {
			req.Lease = DefaultLease
		}
		w := fmt.Sprintf("a slot (%s: %s)", req.Scope, req.Limits.Describe())
		req.Queued = func() {
			what = append(what, w)
			live(r, "waiting for "+w)
		}
		rel, err := e.Slots.Take(ctx, req)
		if err != nil {
			return release, nil, err
		}
		held = append(held, rel)
	}
	if len(what) == 0 {
		return release, nil, nil
	}
	msg := fmt.Sprintf("waited %s for %s", time.Since(began).Round(time.Millisecond), strings.Join(what, " and "))
	live(r, msg) // what it says now: no longer waiting
	return release, &envelope.Feedback{Phase: "limits", Level: envelope.LevelInfo, Timestamp: envelope.Timestamp(envelope.Now()), Message: msg}, nil
}

// live tells the attempt's live feedback (status, the console).
func live(r *stepRun, msg string) {
	if r.at.OnFeedback != nil {
		r.at.OnFeedback(envelope.Feedback{Phase: "limits", Level: envelope.LevelInfo, Timestamp: envelope.Timestamp(envelope.Now()), Message: msg})
	}
}

// nonce is 64 random bits, in hex.
func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
