package whatnext

import (
	"reflect"
	"testing"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
)

func failed(id string, code, cause client.ErrorCode, severity string) client.StepResult {
	return client.StepResult{ID: id, Status: client.StepFailed, Envelope: &client.Envelope{
		Error:    &client.ErrorInfo{Code: code, Cause: cause, Severity: severity},
		Feedback: []client.Feedback{{Phase: "stderr", Detail: "a\nb\nc\nd\ne\nf\ng\n"}},
	}}
}

func TestOf(t *testing.T) {
	tail := []string{"c", "d", "e", "f", "g"}
	waiting := failed("w", "TOOL_FAILURE", "", "HIGH")
	waiting.Status, waiting.Waiting = client.StepWaiting, &client.Wait{Kind: client.WaitDecision}
	approval := client.StepResult{ID: "a", Status: client.StepWaiting, Waiting: &client.Wait{Kind: client.WaitApproval}}
	for _, c := range []struct {
		name string
		r    client.Result
		want []client.Next
	}{
		{"passed", client.Result{Status: client.StatusPassed, Steps: []client.StepResult{{ID: "x", Status: client.StepSucceeded}}}, nil},
		{"a failure the running run absorbs says nothing yet", client.Result{Status: client.StatusRunning, Steps: []client.StepResult{failed("x", "TOOL_FAILURE", "", "HIGH")}}, nil},
		{"an approval is no failure", client.Result{Status: client.StatusRunning, Steps: []client.StepResult{approval}}, nil},
		{"ended: rerun from the step, the cause's advice", client.Result{WorkflowID: "r1", Status: client.StatusFailed,
			Steps: []client.StepResult{{ID: "ok", Status: client.StepSucceeded}, failed("slow", "RETRY_EXHAUSTED", "TASK_TIMEOUT", "HIGH")}},
			[]client.Next{{Step: "slow", Code: "RETRY_EXHAUSTED", Severity: "HIGH", Stderr: tail, Command: "capflow rerun r1 --from slow", Advice: caperr.Advice(caperr.TaskTimeout)}}},
		{"no severity: the table's", client.Result{WorkflowID: "r1", Status: client.StatusFailed, Steps: []client.StepResult{failed("x", "DEPENDENCY_UNAVAILABLE", "", "")}},
			[]client.Next{{Step: "x", Code: "DEPENDENCY_UNAVAILABLE", Severity: "HIGH", Stderr: tail, Command: "capflow rerun r1 --from x", Advice: caperr.Advice(caperr.DependencyUnavailable)}}},
		{"waits after a failure: retry", client.Result{WorkflowID: "r1", Status: client.StatusRunning, Steps: []client.StepResult{waiting}},
			[]client.Next{{Step: "w", Code: "TOOL_FAILURE", Severity: "HIGH", Stderr: tail, Command: "capflow retry r1 w",
				Advice: caperr.Advice(caperr.ToolFailure) + "; then the step waits for a decision: retry runs it again, skip absorbs its failure, fail ends it"}}},
		{"invalid plan", client.Result{Status: client.StatusInvalid},
			[]client.Next{{Code: "INVALID_INPUT", Advice: "fix the plan's problems (each names its file, line and field); capflow plan check PLAN shows them all before anything runs"}}},
		{"cancelled", client.Result{WorkflowID: "r1", Status: client.StatusCancelled},
			[]client.Next{{Code: "CANCELLED", Command: "capflow rerun r1", Advice: caperr.Advice(caperr.Cancelled)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Of(&c.r); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}
