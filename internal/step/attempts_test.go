package step

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/wfapi"
)

func TestAttemptStory(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if attemptStory(dir, 1, 3, t0, "succeeded") != nil {
		t.Fatal("a first attempt has no story")
	}
	recordAttempt(dir, report.Attempt{N: 1, Code: caperr.TaskTimeout, Started: t0, Ended: t0.Add(time.Second)})
	recordAttempt(dir, report.Attempt{N: 2, Code: caperr.ToolFailure, Started: t0.Add(2 * time.Second), Ended: t0.Add(3 * time.Second)})
	got := attemptStory(dir, 3, 3, t0.Add(5*time.Second), "succeeded")
	want := "attempt 1/3 failed (TASK_TIMEOUT), waited 1s; attempt 2/3 failed (TOOL_FAILURE), waited 2s; attempt 3/3 succeeded"
	if got == nil || got.Message != want || got.Phase != "retry" {
		t.Fatalf("got %+v\nwant %q", got, want)
	}
	// An attempt that left no record (its worker died) is told as such.
	got = attemptStory(dir, 4, 0, t0.Add(9*time.Second), "failed (TOOL_FAILURE)")
	if got == nil || got.Message != "attempt 1 failed (TASK_TIMEOUT), waited 1s; attempt 2 failed (TOOL_FAILURE); attempt 3 ended without a word (its worker stopped, or it timed out); attempt 4 failed (TOOL_FAILURE)" {
		t.Fatalf("got %q", got.Message)
	}
}

// An attempt's record keeps its message cut, so one of megabytes leaves
// the others readable (found attacking issue 57).
func TestALongMessageKeepsTheRecords(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	recordAttempt(dir, report.Attempt{N: 1, Code: caperr.SchemaViolation, Message: strings.Repeat("x", 2<<20), Started: t0, Ended: t0.Add(time.Second)})
	got := attemptStory(dir, 2, 2, t0.Add(2*time.Second), "succeeded")
	recs := attemptRecords(dir)
	if got == nil || got.Message != "attempt 1/2 failed (SCHEMA_VIOLATION), waited 1s; attempt 2/2 succeeded" || len(recs) != 1 || !strings.HasSuffix(recs[0].Message, "… [cut]") {
		t.Fatalf("%+v, %d records", got, len(recs))
	}
}

// A failure that is not retried for a reason other than spent attempts
// says that reason.
func TestNotRetriedSaysWhy(t *testing.T) {
	cases := []struct {
		code         caperr.Code
		idempotent   bool
		attempt, max int32
		want         string
	}{
		{caperr.ToolFailure, true, 1, 3, ""},
		{caperr.ToolFailure, true, 3, 3, ""},
		{caperr.InvalidInput, true, 1, 3, "not retried: INVALID_INPUT is never retried"},
		{caperr.InvalidInput, true, 3, 3, ""},
		{caperr.ToolFailure, false, 1, 1, "not retried: the tool is not idempotent (another attempt could repeat its effects)"},
	}
	for _, c := range cases {
		if got := notRetried(c.code, c.idempotent, c.attempt, c.max); got != c.want {
			t.Errorf("%+v: %q", c, got)
		}
	}
}

func TestNearTimeoutWarns(t *testing.T) {
	if nearTimeout(7*time.Second, 10*time.Second) != nil || nearTimeout(time.Hour, 0) != nil {
		t.Fatal("warned below 80%, or without a timeout")
	}
	w := nearTimeout(8500*time.Millisecond, 10*time.Second)
	if w == nil || w.Level != "warning" || !strings.Contains(w.Message, "8.5s, 85% of its 10s timeout") {
		t.Fatalf("%+v", w)
	}
}

// A tool's unknown error code is final: its step's message says "not
// retried" once, with one reason (the new-author trial of issue 57 read it
// twice, for two).
func TestAFinalFailureSaysNotRetriedOnce(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		dir := t.TempDir()
		r := &stepRun{in: wfapi.RunToolInput{Step: wfapi.StepCall{ID: "s", Idempotent: idempotent}}, stepDir: dir, recDir: dir,
			attempt: 1, maxAttempts: 3, began: time.Now(), log: hclog.NewNullLogger()}
		env := envelope.Envelope{ToolID: "t", Message: `no (the tool's error code "DISK_ON_FIRE" is not a contract code: TOOL_FAILURE, final)`,
			Error: envelope.ErrorFor(caperr.ToolFailure)}
		env.Error.Retryable = false
		_, err := r.fail(env)
		var failed *Failed
		if !errors.As(err, &failed) {
			t.Fatalf("idempotent %v: %v", idempotent, err)
		}
		// One reason, the stronger, whether or not the tool is idempotent
		// (a new user read "not idempotent" where the code was unknown).
		if msg := failed.Result.Envelope.Message; strings.Count(msg, "not retried") != 1 || !strings.HasSuffix(msg, "("+finalReason+")") {
			t.Errorf("idempotent %v: %q", idempotent, msg)
		}
	}
}
