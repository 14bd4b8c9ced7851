package workflows

import (
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// A local step whose every attempt times out counts each attempt and ends
// RETRY_EXHAUSTED with TASK_TIMEOUT as its cause, saying what the timeout
// was (issue 54: it said 1 attempt, TASK_TIMEOUT and "starttoclose"); one
// with attempts left after its local ones goes on as a regular activity.
func TestLocalTimeoutsAreCountedAttempts(t *testing.T) {
	src := `name: local
failure_policy: continue_all
steps:
  - {id: a, capability: x.a, timeout: 1s, retry: {max_attempts: 2, initial_interval: 1s}}
  - {id: b, capability: x.b, timeout: 1s, retry: {max_attempts: 3, initial_interval: 1s}}
`
	res, p, _ := localRun(t, src, []string{"a", "b"}, map[string]behaviour{"a": sleep(time.Hour), "b": block})
	for _, c := range []struct {
		id, paths string
		attempts  int
		msg       string
	}{
		{"a", "LL", 2, "a timed out: attempt 2 of 2 ran for 1s, its timeout"},
	} {
		s := stepOf(t, res, c.id)
		e := s.Envelope
		if p.got[c.id] != c.paths || s.Status != wfapi.StepFailed || s.Attempts != c.attempts || e == nil || e.Error == nil ||
			string(e.Error.Code) != string(caperr.RetryExhausted) || string(e.Error.Cause) != string(caperr.TaskTimeout) || e.Message != c.msg {
			t.Errorf("%s: paths %q %+v %+v", c.id, p.got[c.id], s, e)
		}
	}
	// The test server neither retries a timed-out activity nor says its
	// attempt: e2e's TestLocalStepTimesOut counts b's on a real one.
	if b := stepOf(t, res, "b"); p.got["b"] != "LLA" || b.Status != wfapi.StepFailed || b.Execution != PathLocalThenActivity {
		t.Errorf("b: paths %q %+v", p.got["b"], b)
	}
}

func stepOf(t *testing.T, res *wfapi.Result, id string) wfapi.StepResult {
	t.Helper()
	for _, s := range res.Steps {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no step %s", id)
	return wfapi.StepResult{}
}
