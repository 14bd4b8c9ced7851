package envelope

import (
	"slices"
	"sync"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// Builder accumulates feedback and produces an envelope. It is what
// builtin tools and CLI commands use, so every result is coherent by
// construction.
type Builder struct {
	toolID   string
	start    time.Time
	redactor *Redactor
	// mu guards feedback: a tool's proxy and its servers' publishers add
	// events from goroutines of their own.
	mu       sync.Mutex
	feedback []Feedback
}

// NewBuilder starts timing a tool or command.
func NewBuilder(toolID string) *Builder {
	return &Builder{toolID: toolID, start: Now()}
}

// WithRedactor makes every text the builder emits pass through r.
func (b *Builder) WithRedactor(r *Redactor) *Builder { b.redactor = r; return b }

// Redact is s through the builder's redactor: for a text sent on, or cut,
// before the builder's envelope is (a cut secret is not found whole).
func (b *Builder) Redact(s string) string { return b.redactor.String(s) }

// Add appends a feedback event stamped now.
func (b *Builder) Add(phase, level, message, detail string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.feedback = append(b.feedback, Feedback{Phase: phase, Level: level, Message: message, Detail: detail, Timestamp: Timestamp(Now())})
}

// AddTimed appends a feedback event with a duration.
func (b *Builder) AddTimed(phase, level, message string, d time.Duration) {
	ms := d.Milliseconds()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.feedback = append(b.feedback, Feedback{Phase: phase, Level: level, Message: message, Timestamp: Timestamp(Now()), DurationMS: &ms})
}

// Append adds events produced elsewhere (a tool's own feedback, its
// stderr events), each after the last entry not later than it: feedback
// stays in time order, as Validate requires, when an event was stamped
// before an entry added here (a sandbox warning made before "start").
func (b *Builder) Append(fs ...Feedback) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range fs {
		at, err := time.Parse(time.RFC3339Nano, f.Timestamp)
		i := len(b.feedback)
		for err == nil && i > 0 {
			// An entry whose time cannot be read is passed over, as
			// Validate passes over it.
			if prev, perr := time.Parse(time.RFC3339Nano, b.feedback[i-1].Timestamp); perr == nil && !prev.After(at) {
				break
			}
			i--
		}
		b.feedback = slices.Insert(b.feedback, i, f)
	}
}

// Info, Warn and Error are shorthands for Add.
func (b *Builder) Info(phase, message string)          { b.Add(phase, LevelInfo, message, "") }
func (b *Builder) Warn(phase, message string)          { b.Add(phase, LevelWarning, message, "") }
func (b *Builder) Error(phase, message, detail string) { b.Add(phase, LevelError, message, detail) }
func (b *Builder) Feedback() []Feedback {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Feedback(nil), b.feedback...)
}
func (b *Builder) Elapsed() time.Duration { return Now().Sub(b.start) }

// Succeed returns a successful envelope.
func (b *Builder) Succeed(message string, data any) Envelope {
	return b.finish(Envelope{Success: true, ExitCode: 0, Message: message, Data: data})
}

// Fail returns a failed envelope with the code's exit status. An error
// feedback entry is added when none exists, as the contract requires.
func (b *Builder) Fail(code caperr.Code, message string, data any) Envelope {
	exit := caperr.Lookup(code).ExitCode
	return b.FailWithExit(code, exit, message, data)
}

// FailWithExit is Fail with an explicit exit status (a tool's own).
func (b *Builder) FailWithExit(code caperr.Code, exit int, message string, data any) Envelope {
	if exit == 0 {
		exit = 1
	}
	hasErr := false
	for _, f := range b.Feedback() {
		if f.Level == LevelError {
			hasErr = true
			break
		}
	}
	if !hasErr {
		b.Error("result", message, string(code))
	}
	return b.finish(Envelope{Success: false, ExitCode: exit, Message: message, Data: data, Error: ErrorFor(code)})
}

// FailErr fails with err's code and message.
func (b *Builder) FailErr(err error, data any) Envelope {
	return b.Fail(caperr.CodeOf(err), err.Error(), data)
}

func (b *Builder) finish(e Envelope) Envelope {
	now := Now()
	e.ToolID = b.toolID
	e.Timestamp = Timestamp(now)
	e.DurationMS = now.Sub(b.start).Milliseconds()
	e.Feedback = append([]Feedback{}, b.Feedback()...)
	if b.redactor != nil {
		b.redactor.Envelope(&e)
	}
	return e
}
