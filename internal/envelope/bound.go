package envelope

import (
	"encoding/json"
	"fmt"

	"github.com/capflow/capflow/internal/caperr"
)

// What an envelope may carry into a run's history (docs/envelope.md): a
// tool may print megabytes, but Temporal refuses payloads past 2 MB and
// warns at 512 KB. The whole envelope stays in the step's folder.
const (
	MaxMessage       = 4 << 10 // bytes of the message
	MaxFeedback      = 100     // feedback entries, the last of which says how many were dropped
	MaxFeedbackEntry = 4 << 10 // bytes of one entry's message and detail together
)

// Bounded returns e cut to the limits above, and whether it
// cut anything. Feedback keeps its first and last entries (a failure's
// error is usually last) and ends with one entry saying how many were
// dropped and where the whole envelope is (stored).
func Bounded(e Envelope, stored string) (Envelope, bool) {
	cut := false
	if len(e.Message) > MaxMessage {
		e.Message, cut = Truncate(e.Message, MaxMessage), true
	}
	fb := make([]Feedback, 0, min(len(e.Feedback), MaxFeedback))
	keep := func(f Feedback) {
		var c bool
		if f, c = BoundedFeedback(f); c {
			cut = true
		}
		fb = append(fb, f)
	}
	if n := len(e.Feedback); n > MaxFeedback {
		head := (MaxFeedback - 1) / 2
		tail := MaxFeedback - 1 - head
		for _, f := range e.Feedback[:head] {
			keep(f)
		}
		for _, f := range e.Feedback[n-tail:] {
			keep(f)
		}
		last := e.Feedback[n-1]
		where := ""
		if stored != "" {
			where = "; every entry is in " + stored
		}
		fb = append(fb, Feedback{Phase: "output", Level: LevelWarning, Timestamp: last.Timestamp,
			Message: fmt.Sprintf("dropped %d of %d feedback entries (entries %d to %d)%s", n-MaxFeedback+1, n, head+1, n-tail, where)})
		cut = true
	} else {
		for _, f := range e.Feedback {
			keep(f)
		}
	}
	if e.Feedback != nil {
		e.Feedback = fb
	}
	return e, cut
}

// BoundedFeedback cuts one entry's message and detail to MaxFeedbackEntry
// bytes together.
func BoundedFeedback(f Feedback) (Feedback, bool) {
	cut := false
	if len(f.Phase) > maxPhase {
		// A phase is a word: megabytes of one passed every other bound.
		f.Phase, cut = Truncate(f.Phase, maxPhase), true
	}
	if len(f.Message)+len(f.Detail) <= MaxFeedbackEntry {
		return f, cut
	}
	f.Message = Truncate(f.Message, MaxFeedbackEntry*3/4)
	f.Detail = Truncate(f.Detail, MaxFeedbackEntry-len(f.Message))
	return f, true
}

// maxPhase bounds a feedback entry's phase.
const maxPhase = 64

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "… [cut]"
	return caperr.Prefix(s, n-len(mark)) + mark
}

// Size is e's JSON size.
func Size(e *Envelope) int {
	b, err := json.Marshal(e)
	if err != nil {
		return 0
	}
	return len(b)
}
