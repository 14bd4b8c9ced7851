package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// resetAfter resets a run with the temporal CLI, as an operator would, to
// the workflow task that completed just after step's activity did, and
// returns the new run's ID.
func resetAfter(t *testing.T, id, step string) string {
	t.Helper()
	ctx := context.Background()
	it := h.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var scheduled, completed, point int64
	for it.HasNext() && point == 0 {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.GetActivityTaskScheduledEventAttributes().GetActivityId() == "step-"+step:
			scheduled = ev.GetEventId()
		case scheduled != 0 && ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId() == scheduled:
			completed = ev.GetEventId()
		case completed != 0 && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			point = ev.GetEventId()
		}
	}
	if point == 0 {
		t.Fatalf("no workflow task completed after step %s in %s", step, id)
	}
	out, err := exec.Command(h.temporalBin, "workflow", "reset", "--address", h.address, "--namespace", "default",
		"-w", id, "--event-id", fmt.Sprint(point), "--reason", "e2e: reset after "+step, "--output", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("temporal workflow reset: %v\n%s", err, out)
	}
	d, err := h.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// A run reset (temporal workflow reset) to just after a finished step does
// not start a non-idempotent step that already ran after that point: the
// step fails with POLICY_BLOCKED naming the run it ran in and the reset;
// with on_failure: ask it waits, and `capflow retry` runs it anyway. The
// idempotent steps after the point run again, as a reset means.
func TestAResetDoesNotRerunANonIdempotentStep(t *testing.T) {
	for _, ask := range []bool{false, true} {
		t.Run(fmt.Sprintf("ask=%v", ask), func(t *testing.T) {
			log := h.logPath(fmt.Sprintf("reset-%v.log", ask))
			onFailure := ""
			if ask {
				onFailure = ", on_failure: ask"
			}
			plan := h.writePlan(t, fmt.Sprintf("reset-%v", ask), fmt.Sprintf(`name: reset
steps:
  - {id: a, capability: test.noop}
  - {id: charge, capability: test.once, retry: {max_attempts: 1}, with: {seconds: 0, log: %q}, needs: [a]%s}
  - {id: c, capability: test.noop, needs: [charge]}
`, log, onFailure))
			id := startDetached(t, plan)
			first := waitResult(t, id, time.Minute)
			if first.Status != wfapi.StatusPassed || len(readAttemptLog(t, log).lines) != 2 {
				t.Fatalf("first run: %s %s", first.Status, first.Message)
			}
			newRun := resetAfter(t, id, "a")
			if newRun == first.RunID {
				t.Fatal("the reset started no new run")
			}
			if ask {
				waitStep(t, id, "charge", "waiting", func(s wfapi.StepState) bool { return s == wfapi.StepWaiting })
				if code, e, stderr := h.capflow(t, "retry", id, "charge"); code != 0 {
					t.Fatalf("capflow retry: exit %d %s\n%s", code, e.Message, stderr)
				}
			}
			res := waitResult(t, id, time.Minute)
			starts := 0
			for _, l := range readAttemptLog(t, log).lines {
				if l[0] == "attempt" {
					starts++
				}
			}
			charge := stepOf(&res, "charge")
			if ask {
				if res.Status != wfapi.StatusPassed || charge.Status != wfapi.StepSucceeded || starts != 2 {
					t.Fatalf("after retry: %s, charge %s, %d starts", res.Status, charge.Status, starts)
				}
				return
			}
			if starts != 1 {
				t.Fatalf("the non-idempotent step started %d times", starts)
			}
			msg := charge.Envelope.Message
			if res.Status != wfapi.StatusFailed || charge.Status != wfapi.StepFailed || caperr.Code(charge.Envelope.Error.Code) != caperr.PolicyBlocked ||
				!strings.Contains(msg, "already started in run "+first.RunID) || !strings.Contains(msg, "came from it by a reset") {
				t.Fatalf("want charge failed with POLICY_BLOCKED naming run %s and the reset, got %s / %s %s: %s", first.RunID, res.Status, charge.Status, charge.Envelope.Error.Code, msg)
			}
			if a := stepOf(&res, "a"); a.Status != wfapi.StepSucceeded {
				t.Fatalf("step a: %s", a.Status)
			}
		})
	}
}

// A step that was running at the reset point is sent out again by the
// server, with its original input: it is refused all the same.
func TestAResetDoesNotRerunARunningNonIdempotentStep(t *testing.T) {
	log := h.freshLog("reset-running.log")
	plan := h.writePlan(t, "reset-running", fmt.Sprintf(`name: reset-running
steps:
  - {id: a, capability: test.noop}
  - {id: charge, capability: test.once, retry: {max_attempts: 1}, with: {seconds: 3, log: %q}, needs: [a]}
  - {id: b, capability: test.noop, needs: [a]}
`, log))
	id := startDetached(t, plan)
	waitStepRunning(t, id, "charge")
	waitStep(t, id, "b", "succeeded", func(s wfapi.StepState) bool { return s == wfapi.StepSucceeded })
	first, err := h.client.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	// The task that recorded b's end: charge is still running there.
	resetAfter(t, id, "b")
	res := waitResult(t, id, time.Minute)
	charge := stepOf(&res, "charge")
	starts := 0
	for _, l := range readAttemptLog(t, log).lines {
		if l[0] == "attempt" {
			starts++
		}
	}
	firstRun := first.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	if starts != 1 || charge.Status != wfapi.StepFailed || caperr.Code(charge.Envelope.Error.Code) != caperr.PolicyBlocked ||
		!strings.Contains(charge.Envelope.Message, "already started in run "+firstRun) {
		t.Fatalf("want charge refused (started once, in %s), got %d starts, %s %+v", firstRun, starts, charge.Status, charge.Envelope)
	}
}
