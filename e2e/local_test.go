package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// TestLocalSteps: steps whose tools run as local activities (a builtin, a
// command tool, for_each items) next to a regular one, on the real
// server; a local tool that fails its local attempts goes on as a regular
// activity with its attempts numbered on. The run's history is recorded
// for the replay test.
func TestLocalSteps(t *testing.T) {
	p := h.writePlan(t, "local-steps", `name: local-steps
outputs: {count: "${steps.count.data.result}"}
steps:
  - {id: count, capability: json.query, with: {query: "1 + 1"}}
  - {id: shell, capability: test.noop_local, needs: [count]}
  - id: each
    capability: text.render
    needs: [shell]
    for_each: [1, 2, 3]
    with: {template: "item {{.n}}", values: {n: "${item}"}}
  - {id: flaky, capability: test.flaky_local, needs: [count]}
  - {id: remote, capability: test.noop, needs: [each, flaky]}
`)
	code, r := h.run(t, p)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	want := map[string]string{"count": "inline", "shell": "local", "flaky": "local, then activity", "remote": "activity"}
	for id, path := range want {
		if s := r.step(t, id); s.Execution != path {
			t.Errorf("step %s ran %q, want %q", id, s.Execution, path)
		}
	}
	flaky := r.step(t, "flaky")
	if flaky.Attempts != 3 || flaky.Envelope == nil || !strings.Contains(string(mustJSON(t, flaky.Envelope.Data)), `"attempt":3`) {
		t.Fatalf("flaky: %d attempts, envelope %+v", flaky.Attempts, flaky.Envelope)
	}
	if each := r.step(t, "each"); each.ItemCounts == nil || each.ItemCounts.Succeeded != 3 {
		t.Fatalf("each: %+v", each.ItemCounts)
	}
	if r.Outputs["count"] != float64(2) {
		t.Fatalf("outputs %v", r.Outputs)
	}
	// report.json tells each step's history: flaky's two failed attempts.
	var doc struct {
		Transitions map[string][]struct{ State, At, Reason string } `json:"transitions"`
	}
	raw, err := os.ReadFile(r.Report.JSON)
	if err != nil || json.Unmarshal(raw, &doc) != nil {
		t.Fatalf("report.json: %v", err)
	}
	var states []string
	for _, tr := range doc.Transitions["flaky"] {
		states = append(states, tr.State)
	}
	if strings.Join(states, ",") != "running,retrying,running,retrying,succeeded" {
		t.Fatalf("flaky's transitions: %+v", doc.Transitions["flaky"])
	}
	validResult(t, r.WorkflowID)
	recordHistory(t, r.WorkflowID, "local-steps")
}

// TestFollowCountsAContinuedStepsAttempts: a local step that failed twice
// continues as a regular activity, whose attempts Temporal counts from 1;
// status --follow tells the step's own (attempt 3 failed, attempt 4 of 4),
// not the activity's (1 failed, 2 of 2).
func TestFollowCountsAContinuedStepsAttempts(t *testing.T) {
	p := h.writePlan(t, "follow-attempts", `name: follow-attempts
steps:
  - {id: flaky, capability: test.flaky_local, with: {slow: true}}
`)
	code, e, stderr := h.capflow(t, "run", p, "--detach")
	var started struct {
		WorkflowID string `json:"workflow_id"`
	}
	data(t, e, &started)
	if code != 0 {
		t.Fatalf("run exit %d %s\n%s", code, e.Message, stderr)
	}
	code, e, stderr = h.capflowEnv(t, []string{"CAPFLOW_PROGRESS=1"}, "status", started.WorkflowID, "--follow")
	var r runResult
	data(t, e, &r)
	if code != 0 || r.Status != "passed" || r.step(t, "flaky").Attempts != 4 {
		t.Fatalf("exit %d %s (%s)\n%s", code, r.Status, r.Message, stderr)
	}
	if want := "flaky: attempt 3 failed (attempt 3 fails), attempt 4 of 4"; !strings.Contains(stderr, want) {
		t.Fatalf("--follow did not say %q:\n%s", want, stderr)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// max_run_seconds is a deadline on the local path too: a chain of local
// one-second steps under a 3 s budget stops near 3 s, failed, naming the
// budget (it ran all six before: no timer fires within the workflow task
// that runs local steps). Step timeouts longer than the budget are
// clamped, not refused before the run.
func TestDeadlineHoldsForLocalSteps(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: local-deadline\npolicy: {limits: {max_run_seconds: 3}}\nsteps:\n  - {id: s0, capability: test.slow_local, with: {seconds: 1}}\n")
	for i := 1; i < 6; i++ {
		fmt.Fprintf(&b, "  - {id: s%d, capability: test.slow_local, needs: [s%d], with: {seconds: 1}}\n", i, i-1)
	}
	code, r := h.run(t, h.writePlan(t, "local-deadline", b.String()))
	if code == 0 || r.Status != "failed" || !strings.Contains(r.Message, "max_run_seconds (3s)") {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	succeeded := 0
	for _, s := range r.Steps {
		if s.Status == "succeeded" {
			succeeded++
		}
	}
	if succeeded >= 5 {
		t.Fatalf("%d one-second steps succeeded under a 3 s budget", succeeded)
	}
	recordHistory(t, r.WorkflowID, "deadline-local")
}

// TestLocalStepTimesOut: a local step whose attempts time out counts
// each (two local, one regular), keeps its back-off when it goes on as a
// regular activity (2 s after the second attempt, as its policy says),
// ends RETRY_EXHAUSTED with TASK_TIMEOUT as the cause, says what the
// timeout was, and what to do next (issue 54: it said 1 attempt,
// TASK_TIMEOUT, "(starttoclose)", and the regular attempt came at once).
func TestLocalStepTimesOut(t *testing.T) {
	t.Parallel()
	p := h.writePlan(t, "local-timeout", `name: local-timeout
steps:
  - {id: s, capability: test.slow_local, with: {seconds: 60}, timeout: 3s, retry: {max_attempts: 3, initial_interval: 1s, backoff: 2.0}}
`)
	code, r := h.run(t, p)
	s := r.step(t, "s")
	e := s.Envelope
	if code != 1 || r.Status != "failed" || s.Attempts != 3 || s.Execution != "local, then activity" || e == nil || e.Error == nil ||
		e.Error.Code != "RETRY_EXHAUSTED" || e.Error.Cause != "TASK_TIMEOUT" || !strings.HasPrefix(e.Message, "s timed out: attempt 3 of 3 ran for 3s, its timeout") {
		t.Fatalf("exit %d %s: %+v %+v", code, r.Status, s, e)
	}
	if len(r.Next) != 1 || r.Next[0].Command != "capflow rerun "+r.WorkflowID+" --from s" || r.Next[0].Advice != caperr.Advice(caperr.TaskTimeout) {
		t.Fatalf("next: %+v", r.Next)
	}
	var doc struct {
		Transitions map[string][]struct {
			State string
			At    time.Time
		} `json:"transitions"`
	}
	raw, err := os.ReadFile(r.Report.JSON)
	if err != nil || json.Unmarshal(raw, &doc) != nil {
		t.Fatalf("report.json: %v", err)
	}
	var states []string
	var at []time.Time
	for _, tr := range doc.Transitions["s"] {
		states = append(states, tr.State)
		at = append(at, tr.At)
	}
	// The third attempt's own record may come after the report (the
	// server timed it out): its end is the step's.
	if strings.Join(states, ",") != "running,retrying,running,retrying,failed" && strings.Join(states, ",") != "running,retrying,running,retrying,running,failed" {
		t.Fatalf("s's transitions: %+v", doc.Transitions["s"])
	}
	// 2 s of back-off, then 3 s of the regular attempt, after the second
	// ended (at once, as before, it would be 3 s).
	if took := at[len(at)-1].Sub(at[3]); took < 4800*time.Millisecond {
		t.Fatalf("the regular attempt ended %s after the second: it did not wait its 2 s back-off: %+v", took, doc.Transitions["s"])
	}
	// report.md tells each attempt (the report kept only the last's).
	if md, err := os.ReadFile(r.Report.Markdown); err != nil || !strings.Contains(string(md), "**s** (3 attempts)") || !strings.Contains(string(md), ": attempt 1 failed (TASK_TIMEOUT)") {
		t.Fatalf("report.md's attempts: %v\n%s", err, md)
	}
	recordChange(t, "local-backoff", "local-backoff", r.WorkflowID)
}
