package report

import (
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

func TestTransitions(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	s := wfapi.StepResult{ID: "s", Status: wfapi.StepSucceeded, Attempts: 3, StartedAt: "2026-11-23T10:00:00.000Z", EndedAt: "2026-11-23T10:00:09.000Z",
		Decisions: []wfapi.Decision{{Wait: "s#1", Kind: wfapi.WaitDecision, Action: wfapi.ActionRetry, By: "ada", At: "2026-11-23T10:00:05.000Z"}}}
	attempts := []Attempt{
		{N: 2, Code: caperr.ToolFailure, Message: "again", Started: t0.Add(2 * time.Second), Ended: t0.Add(3 * time.Second)},
		{N: 1, Code: caperr.TaskTimeout, Message: "slow", Started: t0, Ended: t0.Add(time.Second)},
	}
	var got []string
	for _, tr := range Transitions(s, attempts) {
		got = append(got, tr.At[17:23]+" "+tr.State+" "+tr.Reason)
	}
	want := []string{
		"00.000 running ",
		"01.000 retrying attempt 1 failed (TASK_TIMEOUT): slow",
		"02.000 running attempt 2",
		"03.000 retrying attempt 2 failed (TOOL_FAILURE): again",
		"05.000 decided retried by ada at 2026-11-23T10:00:05.000Z",
		"09.000 succeeded ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s", strings.Join(got, "\n"))
	}
	// A step that never started has its end only.
	skipped := Transitions(wfapi.StepResult{ID: "k", Status: wfapi.StepSkipped, Reason: "when: false", EndedAt: "2026-11-23T10:00:01.000Z"}, nil)
	if len(skipped) != 1 || skipped[0].State != "skipped" || skipped[0].Reason != "when: false" {
		t.Fatalf("%+v", skipped)
	}
}
