package activities

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// beats sends a running tool's heartbeats: the latest feedback event (the
// Web UI shows it) and its last stderr lines. They are also how a
// cancellation reaches a running tool.
type beats struct {
	ctx context.Context
	// attempt and maxAttempts are the step's, own Temporal's attempt of
	// this activity.
	attempt, maxAttempts, own int32
	latest                    atomic.Pointer[wire.Feedback]
	mu                        sync.Mutex
	lines                     []string
	lineSeq                   int
	done                      chan struct{}
	// soonMu guards soon (a beat is due within soonAfter) and stopped:
	// the timer's beat and stop's are one or the other, never neither.
	soonMu        sync.Mutex
	soon, stopped bool
}

// soonAfter is how long a tool's stderr line or feedback event waits for
// its beat: those coming meanwhile share it. A beat each cost the worker
// the heartbeat's encoding, whatever the SDK then sends: a million empty
// lines took it 4 s of CPU (found attacking issue 57).
const soonAfter = 250 * time.Millisecond

func startBeats(ctx context.Context, at step.Attempt) *beats {
	info := activity.GetInfo(ctx)
	b := &beats{ctx: ctx, attempt: at.Number, maxAttempts: at.Max, own: info.Attempt, done: make(chan struct{})}
	if at.Number != info.Attempt {
		// A step that continues as this activity: its first beat says at
		// once which of the step's attempts this is (wire.Heartbeat).
		b.beat()
	}
	// With a heartbeat timeout, beat well within it; without one, every
	// 2s, which is how a cancellation reaches a long step.
	period := info.HeartbeatTimeout / 3
	if period <= 0 || period > 2*time.Second {
		period = 2 * time.Second
	}
	warn := nearTimeoutTimer(info.StartToCloseTimeout, time.Since(info.StartedTime))
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		defer warn.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
				b.beat()
			case <-warn.C:
				// While the step runs, not after: the Web UI's pending
				// activity and capflow run's progress show it now.
				b.setLatest(envelope.Feedback{Phase: "timeout", Level: envelope.LevelWarning, Timestamp: envelope.Timestamp(envelope.Now()),
					Message: fmt.Sprintf("running for %.0f%% of its %s timeout: it fails then unless it ends; raise the step's timeout (or the tool's timeouts.start_to_close)", 100*step.NearTimeout, info.StartToCloseTimeout)})
				b.beat()
			}
		}
	}()
	return b
}

// nearTimeoutTimer fires when an attempt reaches step.NearTimeout of its
// timeout (never without one).
func nearTimeoutTimer(timeout, elapsed time.Duration) *time.Timer {
	t := time.NewTimer(time.Duration(step.NearTimeout*float64(timeout)) - elapsed)
	if timeout <= 0 {
		t.Stop()
	}
	return t
}

func (b *beats) beat() { activity.RecordHeartbeat(b.ctx, b.details()) }

// details is what a heartbeat carries now.
func (b *beats) details() any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return wfapi.Heartbeat{Attempt: b.attempt, ActivityAttempt: b.own, MaxAttempts: b.maxAttempts, Latest: b.latest.Load(), Lines: slices.Clone(b.lines), LineSeq: b.lineSeq}
}

// feedback is a tool's event: the latest, sent soon.
func (b *beats) feedback(f envelope.Feedback) {
	b.setLatest(f)
	b.beatSoon()
}

func (b *beats) setLatest(f envelope.Feedback) {
	f, _ = envelope.BoundedFeedback(f)
	fb := wire.Feedback(f)
	b.latest.Store(&fb)
}

// beatSoon beats within soonAfter, once for everything that asks meanwhile
// (stop sends one still due).
func (b *beats) beatSoon() {
	b.soonMu.Lock()
	defer b.soonMu.Unlock()
	if b.soon || b.stopped {
		return
	}
	b.soon = true
	time.AfterFunc(soonAfter, func() {
		b.soonMu.Lock()
		due := b.soon && !b.stopped
		b.soon = false
		b.soonMu.Unlock()
		if due {
			b.beat()
		}
	})
}

func (b *beats) stderr(line string) {
	if len(line) > 300 {
		line = line[:300] + "…"
	}
	b.mu.Lock()
	b.lines = append(b.lines, line)
	if len(b.lines) > wfapi.HeartbeatLines {
		b.lines = b.lines[len(b.lines)-wfapi.HeartbeatLines:]
	}
	b.lineSeq++
	b.mu.Unlock()
	b.beatSoon()
}

// stop ends the beats; one still due goes out now, so a tool that printed
// its error and exited at once has its last lines in the attempt's last
// heartbeat (the SDK sends that one with the attempt's end).
func (b *beats) stop() {
	b.soonMu.Lock()
	due := b.soon
	b.soon, b.stopped = false, true
	b.soonMu.Unlock()
	if due {
		b.beat()
	}
	close(b.done)
}

// every calls f each period until done closes or f says to stop.
func every(period time.Duration, done <-chan struct{}, f func() (goOn bool)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if !f() {
				return
			}
		}
	}
}
