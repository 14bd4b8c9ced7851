package envelope

import (
	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
)

// Wire is e as clients read it (client.Envelope): the one conversion from
// the domain's envelope, field by field.
func (e *Envelope) Wire() *client.Envelope {
	if e == nil {
		return nil
	}
	w := &client.Envelope{ToolID: e.ToolID, ExitCode: e.ExitCode, Success: e.Success, Timestamp: e.Timestamp,
		Message: e.Message, Data: e.Data, DurationMS: e.DurationMS, Feedback: make([]client.Feedback, len(e.Feedback))}
	for i, f := range e.Feedback {
		w.Feedback[i] = client.Feedback(f)
	}
	if x := e.Error; x != nil {
		w.Error = &client.ErrorInfo{Code: client.ErrorCode(x.Code), Severity: string(x.Severity), Retryable: x.Retryable, Cause: client.ErrorCode(x.Cause)}
	}
	return w
}

// FromWire is the domain's envelope of w (a step result's, read back).
func FromWire(w *client.Envelope) *Envelope {
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
