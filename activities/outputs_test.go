package activities

import (
	"reflect"
	"testing"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
)

// An output that reads a step that did not succeed is null, as
// docs/plans.md says, not the failed envelope's data (a failed run printed
// its failed step's "outputs": the new-author trial of issue 57).
func TestOutputsOfAStepThatDidNotSucceedAreNull(t *testing.T) {
	rr := &wfapi.ResolveResult{Inputs: map[string]any{"n": 3.0}, Outputs: map[string]string{"failed": "${steps.a.data.x}", "ok": "${steps.b.data.x}",
		"both": "${steps.a.data.x} and ${steps.b.data.x}", "skipped": "${steps.c.data.x}",
		// Whether a step succeeded is fine to read of any step.
		"deployed": "${steps.a.success}", "mixed": "${inputs.n} ${steps.c.success}", "input": "${inputs.n}"}}
	res := &wfapi.Result{Steps: []wfapi.StepResult{
		{ID: "a", Status: wfapi.StepFailed, Envelope: &envelope.Envelope{Data: map[string]any{"x": 1.0}}},
		{ID: "b", Status: wfapi.StepSucceeded, Envelope: &envelope.Envelope{Data: map[string]any{"x": 2.0}}},
		{ID: "c", Status: wfapi.StepSkipped},
	}}
	want := map[string]any{"failed": nil, "ok": 2.0, "both": nil, "skipped": nil, "deployed": false, "mixed": "3 false", "input": 3.0}
	if got := outputs(rr, res); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}
