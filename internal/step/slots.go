package step

import (
	"context"
	"fmt"
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

// SlotRequest is one attempt's request for a slot of a tool's limit.
type SlotRequest struct {
	Tool   string
	Limits manifest.Limits
	// Key is the key input's value ("" without a key).
	Key string
	// Holder names the attempt: run, step or item, attempt number.
	Holder string
	// Lease is how long the slot stays the holder's without a renewal:
	// how soon a dead worker's slot comes back.
	Lease time.Duration
}

// DefaultLease is a slot's lease when the step has no heartbeat timeout.
const DefaultLease = 30 * time.Second

// takeSlot waits for a slot of the tool's limit when it has one, saying
// so in the step's live feedback while it waits; note is what the step's
// envelope keeps of the wait (nil: it did not wait).
func (e *Executor) takeSlot(ctx context.Context, r *stepRun, m *manifest.Manifest, inputs any) (release func(), note *envelope.Feedback, err error) {
	if m.Limits == nil || e.Slots == nil {
		return func() {}, nil, nil
	}
	key := ""
	if f := m.Limits.KeyInput(); f != "" {
		in, _ := inputs.(map[string]any)
		key = fmt.Sprint(in[f])
	}
	lease := r.at.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	what := fmt.Sprintf("a slot (tool %s: %s)", m.Name, m.Limits.Describe())
	if r.at.OnFeedback != nil {
		r.at.OnFeedback(envelope.Feedback{Phase: "limits", Level: envelope.LevelInfo, Timestamp: envelope.Timestamp(envelope.Now()),
			Message: "waiting for " + what})
	}
	began := time.Now()
	release, err = e.Slots.Take(ctx, SlotRequest{Tool: m.Name, Limits: *m.Limits, Key: key, Lease: lease,
		Holder: fmt.Sprintf("%s/%s/%d", r.in.WorkflowID, label(r.in.Step), r.attempt)})
	if err != nil {
		return nil, nil, err
	}
	if waited := time.Since(began); waited >= slotNoted {
		note = &envelope.Feedback{Phase: "limits", Level: envelope.LevelInfo, Timestamp: envelope.Timestamp(envelope.Now()),
			Message: fmt.Sprintf("waited %s for %s", waited.Round(time.Millisecond), what)}
	}
	return release, note, nil
}

// slotNoted: a shorter wait for a slot is not worth a line of the step's
// feedback (a slot free at once takes a round trip to the server).
const slotNoted = 100 * time.Millisecond
