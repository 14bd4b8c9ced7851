package whatnext

import (
	"reflect"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/wire"
)

func failed(id string, code, cause wire.ErrorCode, severity wire.Severity) wire.StepResult {
	return wire.StepResult{ID: id, Status: wire.StepFailed, Envelope: &wire.Envelope{
		Error:    &wire.ErrorInfo{Code: code, Cause: cause, Severity: severity},
		Feedback: []wire.Feedback{{Phase: "stderr", Detail: "a\nb\nc\nd\ne\nf\ng\n"}},
	}}
}

func TestOf(t *testing.T) {
	tail := []string{"c", "d", "e", "f", "g"}
	waiting := failed("w", "TOOL_FAILURE", "", "HIGH")
	waiting.Status, waiting.Waiting = wire.StepWaiting, &wire.Wait{Kind: wire.WaitDecision}
	approval := wire.StepResult{ID: "a", Status: wire.StepWaiting, Waiting: &wire.Wait{Kind: wire.WaitApproval}}
	for _, c := range []struct {
		name string
		r    wire.Result
		want []wire.Next
	}{
		{"passed", wire.Result{Status: wire.StatusPassed, Steps: []wire.StepResult{{ID: "x", Status: wire.StepSucceeded}}}, nil},
		{"a passed run's absorbed failure says nothing", wire.Result{Status: wire.StatusPassed, Steps: []wire.StepResult{{ID: "x", Status: wire.StepSucceeded}, failed("y", "INVALID_INPUT", "", "HIGH")}}, nil},
		{"a failure the running run absorbs says nothing yet", wire.Result{Status: wire.StatusRunning, Steps: []wire.StepResult{failed("x", "TOOL_FAILURE", "", "HIGH")}}, nil},
		{"an approval is no failure", wire.Result{Status: wire.StatusRunning, Steps: []wire.StepResult{approval}}, nil},
		{"ended: rerun from the step, the cause's advice", wire.Result{WorkflowID: "r1", Status: wire.StatusFailed,
			Steps: []wire.StepResult{{ID: "ok", Status: wire.StepSucceeded}, failed("slow", "RETRY_EXHAUSTED", "TASK_TIMEOUT", "HIGH")}},
			[]wire.Next{{Step: "slow", Code: "RETRY_EXHAUSTED", Severity: "HIGH", Stderr: tail, Command: "capflow rerun r1 --from slow", Advice: caperr.Advice(caperr.TaskTimeout)}}},
		{"no severity: the table's", wire.Result{WorkflowID: "r1", Status: wire.StatusFailed, Steps: []wire.StepResult{failed("x", "DEPENDENCY_UNAVAILABLE", "", "")}},
			[]wire.Next{{Step: "x", Code: "DEPENDENCY_UNAVAILABLE", Severity: "HIGH", Stderr: tail, Command: "capflow rerun r1 --from x", Advice: caperr.Advice(caperr.DependencyUnavailable)}}},
		{"waits after a failure: retry", wire.Result{WorkflowID: "r1", Status: wire.StatusRunning, Steps: []wire.StepResult{waiting}},
			[]wire.Next{{Step: "w", Code: "TOOL_FAILURE", Severity: "HIGH", Stderr: tail, Command: "capflow retry r1 w",
				Advice: caperr.Advice(caperr.ToolFailure) + "; then the step waits for a decision: retry runs it again, skip absorbs its failure, fail ends it"}}},
		{"the tool and its input named", wire.Result{WorkflowID: "r1", Status: wire.StatusFailed, Report: wire.ReportPaths{JSON: "/p/.capflow/runs/r1/report.json"},
			Steps: []wire.StepResult{func() wire.StepResult { s := failed("boom", "TOOL_FAILURE", "", "HIGH"); s.Tool = "boom"; return s }()}},
			[]wire.Next{{Step: "boom", Code: "TOOL_FAILURE", Severity: "HIGH", Stderr: tail, Command: "capflow rerun r1 --from boom",
				Advice: "read the stderr tail; capflow tools run boom --inputs-file /p/.capflow/runs/r1/records/boom/input.json runs the tool alone on the same input"}}},
		{"no stderr: no tail to read", wire.Result{WorkflowID: "r1", Status: wire.StatusFailed,
			Steps: []wire.StepResult{func() wire.StepResult {
				s := failed("quiet", "TOOL_FAILURE", "", "HIGH")
				s.Envelope.Feedback = nil
				return s
			}()}},
			[]wire.Next{{Step: "quiet", Code: "TOOL_FAILURE", Severity: "HIGH", Command: "capflow rerun r1 --from quiet",
				Advice: "there is no stderr tail to show (the step's feedback and its folder may say more); capflow tools run TOOL --inputs-file FILE runs the tool alone on the same input"}}},
		{"invalid plan", wire.Result{Status: wire.StatusInvalid},
			[]wire.Next{{Code: "INVALID_INPUT", Advice: "fix the plan's problems (each names its file, line and field); capflow plan check PLAN shows them all before anything runs"}}},
		{"gaps: a tool to scaffold", wire.Result{Status: wire.StatusPartialComplete, Gaps: []wire.Gap{{Reason: "schema_incompatible"}, {Reason: "no_capability_match"}}},
			[]wire.Next{{Code: "TOOL_NOT_FOUND", Advice: "no tool provides the gaps' capabilities: capflow plan check PLAN --output-path GAPS.json, then capflow tools scaffold --from-gaps GAPS.json"}}},
		{"a gap a broken manifest would fill: mend it, not a new tool", wire.Result{Status: wire.StatusPartialComplete, Gaps: []wire.Gap{{Reason: "no_capability_match"},
			{Reason: "no_capability_match", MissingCapability: "pdf.merge", ReasonDetails: map[string]any{"left_out": []any{"tools/pdf-merge/tool.yaml"}}}}},
			[]wire.Next{{Code: "TOOL_NOT_FOUND", Command: "capflow tools validate", Advice: "tools/pdf-merge/tool.yaml declares pdf.merge but is left out for its problems: capflow tools validate names them; fix it, then check the plan again"}}},
		{"a dependency the worker lacks: give it to the worker, no tool to scaffold", wire.Result{Status: wire.StatusPartialComplete, Gaps: []wire.Gap{{Reason: "no_capability_match"},
			{Reason: "dependency_unavailable", ReasonMessage: "t@1.0.0 needs what this machine lacks: environment variable SOME_TOKEN is not set"}}},
			[]wire.Next{{Code: "DEPENDENCY_UNAVAILABLE", Advice: "t@1.0.0 needs what this machine lacks: environment variable SOME_TOKEN is not set: give it to the worker (an environment variable takes the worker's restart), then run again"}}},
		{"gaps that are the steps' to fix: no tool to scaffold", wire.Result{Status: wire.StatusPartialComplete, Gaps: []wire.Gap{{Reason: "schema_incompatible"}}},
			[]wire.Next{{Code: "TOOL_NOT_FOUND", Advice: "a step's inputs do not fit what takes them (its tool, a sub-plan): capflow plan check PLAN names each mismatch; fix the step or what feeds it"}}},
		{"no gap at all (a request nothing covers)", wire.Result{Status: wire.StatusPartialComplete, Gaps: []wire.Gap{}},
			[]wire.Next{{Code: "TOOL_NOT_FOUND", Advice: "no plan covers the request: capflow route REQUEST shows what the router made of it, capflow tools list what the project can do"}}},
		{"cancelled", wire.Result{WorkflowID: "r1", Status: wire.StatusCancelled},
			[]wire.Next{{Code: "CANCELLED", Command: "capflow rerun r1", Advice: caperr.Advice(caperr.Cancelled)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Of(&c.r); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// No code's advice, told of a step without stderr, still sends a person
// to a stderr tail.
func TestNoAdviceReadsAMissingTail(t *testing.T) {
	for _, info := range caperr.All() {
		if a := withoutTail(caperr.Advice(info.Code)); strings.Contains(a, "stderr") && !strings.Contains(a, "no stderr tail to show") {
			t.Errorf("%s: %q", info.Code, a)
		}
	}
}

// An agent step's advice comes from its rounds, not a tool's stderr.
func TestAgentAdvice(t *testing.T) {
	for _, tt := range []struct {
		code   wire.ErrorCode
		breach string
		want   string
	}{
		{"RESOURCE_EXHAUSTED", "llm_calls: 2 of 2 spent", "its budget stopped it before a call (llm_calls: 2 of 2 spent): retry grants one more round"},
		{"RESOURCE_EXHAUSTED", "", "did not finish within max_rounds"},
		{"INVALID_INPUT", "", "every proposal in a row was refused"},
		{"DEPENDENCY_UNAVAILABLE", "", "the model's server did not answer"},
	} {
		s := failed("triage", tt.code, "", "HIGH")
		s.Agent = &wire.AgentRun{Breach: tt.breach}
		next := Of(&wire.Result{WorkflowID: "r", Status: wire.StatusFailed, Steps: []wire.StepResult{s}})
		if len(next) != 1 || !strings.Contains(next[0].Advice, tt.want) || strings.Contains(next[0].Advice, "tools run") {
			t.Errorf("%s %q: %+v", tt.code, tt.breach, next)
		}
	}
}

// A failed run's cause is its first failed step's code, or the code that
// one summarises.
func TestCause(t *testing.T) {
	ok := wire.StepResult{ID: "ok", Status: wire.StepSucceeded}
	bare := wire.StepResult{ID: "bare", Status: wire.StepFailed}
	for _, c := range []struct {
		name  string
		steps []wire.StepResult
		want  caperr.Code
	}{
		{"no step failed", []wire.StepResult{ok}, ""},
		{"the first failed step's", []wire.StepResult{ok, failed("q", "INVALID_INPUT", "", "HIGH"), failed("r", "TOOL_FAILURE", "", "HIGH")}, caperr.InvalidInput},
		{"what retries exhausted", []wire.StepResult{failed("q", "RETRY_EXHAUSTED", "TASK_TIMEOUT", "HIGH")}, caperr.TaskTimeout},
		{"a failed step without an envelope says nothing", []wire.StepResult{bare, failed("r", "SCHEMA_VIOLATION", "", "HIGH")}, caperr.SchemaViolation},
		{"a skipped step's code is not a cause", []wire.StepResult{{ID: "s", Status: wire.StepSkipped, Envelope: failed("s", "QUORUM_NOT_MET", "", "HIGH").Envelope}}, ""},
	} {
		if got := Cause(&wire.Result{Status: wire.StatusFailed, Steps: c.steps}); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A large result leaves its failed steps' envelopes out (wfapi.Trim): what
// to do next, and the run's cause, come from the Next its Finalize made
// from every step, not from what is left (which has no code).
func TestATrimmedResultKeepsItsNext(t *testing.T) {
	full := wire.Result{WorkflowID: "r1", Status: wire.StatusFailed, Steps: []wire.StepResult{failed("x", "RETRY_EXHAUSTED", "TASK_TIMEOUT", "HIGH")}}
	full.Next = Of(&full)
	trimmed := full
	trimmed.Steps = []wire.StepResult{{ID: "x", Status: wire.StepFailed}}
	trimmed.StepsOmitted = 1
	if got := For(&trimmed); !reflect.DeepEqual(got, full.Next) || got[0].Code != "RETRY_EXHAUSTED" {
		t.Errorf("For: %+v", got)
	}
	if got := Cause(&trimmed); got != caperr.RetryExhausted {
		t.Errorf("Cause: %q", got)
	}
	running := trimmed
	running.Status, running.Next = wire.StatusRunning, []wire.Next{{Step: "stale"}}
	if got := For(&running); len(got) != 0 {
		t.Errorf("a running run's Next is made again: %+v", got)
	}
}

// A run whose first failed step's TOOL_FAILURE is final is not worth
// running again as it is (a new user's JSON said retryable: true beside a
// step that said final).
func TestFinal(t *testing.T) {
	final := failed("x", "TOOL_FAILURE", "", "HIGH")
	final.Envelope.Error.Retryable = false
	again := failed("x", "TOOL_FAILURE", "", "HIGH")
	again.Envelope.Error.Retryable = true
	for _, c := range []struct {
		name  string
		steps []wire.StepResult
		want  bool
	}{
		{"final", []wire.StepResult{final}, true},
		{"retryable", []wire.StepResult{again}, false},
		{"another code", []wire.StepResult{failed("x", "INVALID_INPUT", "", "HIGH")}, false},
		{"no envelope (a trimmed result)", []wire.StepResult{{ID: "x", Status: wire.StepFailed}}, false},
		{"the first failed step decides", []wire.StepResult{again, final}, false},
	} {
		if got := Final(&wire.Result{Status: wire.StatusFailed, Steps: c.steps}); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
}
