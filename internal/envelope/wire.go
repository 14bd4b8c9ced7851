package envelope

import (
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/wire"
)

// Wire is e as clients read it (wire.Envelope): the one conversion from
// the domain's envelope, field by field.
func (e *Envelope) Wire() *wire.Envelope {
	if e == nil {
		return nil
	}
	w := &wire.Envelope{ToolID: e.ToolID, ExitCode: e.ExitCode, Success: e.Success, Timestamp: e.Timestamp,
		Message: e.Message, Data: e.Data, DurationMS: e.DurationMS, Feedback: make([]wire.Feedback, len(e.Feedback))}
	for i, f := range e.Feedback {
		w.Feedback[i] = wire.Feedback(f)
	}
	if x := e.Error; x != nil {
		w.Error = &wire.ErrorInfo{Code: wire.ErrorCode(x.Code), Severity: string(x.Severity), Retryable: x.Retryable, Cause: wire.ErrorCode(x.Cause)}
	}
	return w
}

// FromWire is the domain's envelope of w (a step result's, read back).
func FromWire(w *wire.Envelope) *Envelope {
	if w == nil {
		return nil
	}
	e := &Envelope{ToolID: w.ToolID, ExitCode: w.ExitCode, Success: w.Success, Timestamp: w.Timestamp,
		Message: w.Message, Data: w.Data, DurationMS: w.DurationMS, Feedback: make([]Feedback, len(w.Feedback))}
	for i, f := range w.Feedback {
		e.Feedback[i] = Feedback(f)
	}
	if x := w.Error; x != nil {
		e.Error = &ErrorInfo{Code: caperr.Code(x.Code), Severity: caperr.Severity(x.Severity), Retryable: x.Retryable, Cause: caperr.Code(x.Cause)}
	}
	return e
}
