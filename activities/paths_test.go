package activities

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
)

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"", true},
		{"/runs/r/steps/a/data.json", true},
		{"/runs/r", true},
		{"/runs/r/../r2/data.json", false},
		{"/runs/r2/data.json", false},
		{"/etc/passwd", false},
		{"steps/a", false},
	} {
		if err := within("/runs/r", c.path); (err == nil) != c.ok {
			t.Errorf("within(/runs/r, %q) = %v, want ok=%v", c.path, err, c.ok)
		}
	}
}

func TestLocalPath(t *testing.T) {
	run := "/srv/b/.capflow/runs/capflow-x-1"
	for _, c := range []struct{ remote, want string }{
		{"/other/host/.capflow/runs/capflow-x-1/steps/make/data.json", run + "/steps/make/data.json"},
		{"/other/host/.capflow/runs/capflow-x-1/steps/each/items/3/data.json", run + "/steps/each/items/3/data.json"},
		{"/elsewhere/data.json", run + "/steps/make/data.json"},
		{"/h/.capflow/runs/capflow-x-1/../../../../etc/passwd", ""},
	} {
		got, ok := localPath(run, "capflow-x-1", c.remote, "make")
		if (c.want == "") == ok || (ok && got != c.want) {
			t.Errorf("%s: %q %v, want %q", c.remote, got, ok, c.want)
		}
	}
}

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
		err := StepFailed(c.code, c.idempotent, &wfapi.RunToolResult{Envelope: envelope.Envelope{Error: c.info}})
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.NonRetryable() == c.retryable || app.Type() != string(c.code) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
