package workflows

import (
	"reflect"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// A run's result says what to do next as Finalize made it from every
// step: a large run's result keeps no failed step's envelope to make it
// from again (the CLI and the console made it with no code, no stderr).
func TestTheResultCarriesFinalizesNext(t *testing.T) {
	next := []wire.Next{{Step: "a", Code: "TOOL_FAILURE", Severity: "HIGH", Stderr: []string{"boom"}, Command: "capflow rerun r --from a"}}
	f := &fakes{resolved: resolvedFrom(t, "name: x\nsteps:\n  - {id: a, capability: x.a}\n"), behave: map[string]behaviour{"a": fail(caperr.ToolFailure)},
		calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}, next: next}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
	var res wfapi.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != wfapi.StatusFailed || !reflect.DeepEqual(res.Next, next) {
		t.Fatalf("%s, next %+v", res.Status, res.Next)
	}
}
