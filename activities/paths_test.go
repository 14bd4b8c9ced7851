package activities

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// A failed step's error is retryable as the code table says, for an
// idempotent tool, unless its TOOL_FAILURE is marked final (a code capflow
// does not know, or the tool's word).
func TestStepFailedRetry(t *testing.T) {
	for _, c := range []struct {
		name       string
		code       caperr.Code
		idempotent bool
		info       *envelope.ErrorInfo
		retryable  bool
	}{
		{"tool failure", caperr.ToolFailure, true, envelope.ErrorFor(caperr.ToolFailure), true},
		{"not idempotent", caperr.ToolFailure, false, envelope.ErrorFor(caperr.ToolFailure), false},
		{"never retried code", caperr.InvalidInput, true, envelope.ErrorFor(caperr.InvalidInput), false},
		{"marked final", caperr.ToolFailure, true, &envelope.ErrorInfo{Code: caperr.ToolFailure, Retryable: false}, false},
	} {
		err := StepFailed(&step.Failed{Code: c.code, Idempotent: c.idempotent, Result: &wfapi.RunToolResult{Envelope: envelope.Envelope{Error: c.info}}})
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.NonRetryable() == c.retryable || app.Type() != string(c.code) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
