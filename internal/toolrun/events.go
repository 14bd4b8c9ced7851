package toolrun

import (
	"fmt"
	"sort"
	"time"

	"github.com/capflow/capflow/internal/envelope"
)

// maxEvents bounds the stderr events kept of one run: the first and the
// last half of it (an envelope keeps 100 entries anyway, first and last).
const maxEvents = 200

// eventLog keeps a tool's stderr events within maxEvents: the first
// half, and a ring of the last half; dropped counts the rest.
type eventLog struct {
	head, tail []envelope.Feedback
	next       int
	dropped    int
}

func (l *eventLog) add(f envelope.Feedback) {
	switch {
	case len(l.head) < maxEvents/2:
		l.head = append(l.head, f)
	case len(l.tail) < maxEvents/2:
		l.tail = append(l.tail, f)
	default:
		l.tail[l.next] = f
		l.next = (l.next + 1) % len(l.tail)
		l.dropped++
	}
}

// list is the events kept, in order, with a note of those dropped.
func (l *eventLog) list() []envelope.Feedback {
	out := append([]envelope.Feedback{}, l.head...)
	if l.dropped > 0 {
		// Stamped like the first event kept after the gap: in time order
		// it stays between the two halves.
		out = append(out, envelope.Feedback{Phase: "stderr", Level: envelope.LevelWarning, Timestamp: l.tail[l.next].Timestamp,
			Message: fmt.Sprintf("dropped %d stderr events between the first and the last %d", l.dropped, maxEvents/2)})
	}
	out = append(out, l.tail[l.next:]...)
	return append(out, l.tail[:l.next]...)
}

// mergeFeedback keeps both a tool's own feedback and the events it wrote
// to stderr (a tool that writes both loses neither): the events not
// already in its feedback are added, and the whole put in time order when
// every timestamp can be read.
func mergeFeedback(own, events []envelope.Feedback) []envelope.Feedback {
	type key struct{ phase, level, message, timestamp, detail string }
	seen := map[key]bool{}
	for _, f := range own {
		seen[key{f.Phase, f.Level, f.Message, f.Timestamp, f.Detail}] = true
	}
	out := append([]envelope.Feedback{}, own...)
	for _, f := range events {
		if !seen[key{f.Phase, f.Level, f.Message, f.Timestamp, f.Detail}] {
			out = append(out, f)
		}
	}
	at := make([]time.Time, len(out))
	for i, f := range out {
		t, err := time.Parse(time.RFC3339Nano, f.Timestamp)
		if err != nil {
			return out
		}
		at[i] = t
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return at[idx[a]].Before(at[idx[b]]) })
	sorted := make([]envelope.Feedback, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}
