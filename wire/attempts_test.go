package wire

import (
	"testing"
	"time"
)

func TestAttemptLine(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	for _, c := range []struct {
		pa   PendingActivity
		want string
	}{
		{PendingActivity{Attempt: 1, MaxAttempts: 3}, "attempt 1 of 3: waiting for a worker to take it"},
		{PendingActivity{Attempt: 2, MaxAttempts: 3, Worker: "w1", Started: ago(12), LastHeartbeat: ago(1), HeartbeatTimeout: time.Minute},
			"attempt 2 of 3 on worker w1, running 12 s, last heartbeat 1 s ago"},
		{PendingActivity{Attempt: 1, MaxAttempts: 3, Worker: "w1", Started: ago(40), LastHeartbeat: ago(25), HeartbeatTimeout: time.Minute},
			"attempt 1 of 3 on worker w1, running 40 s, last heartbeat 25 s ago: no heartbeat for 25 s (worker w1 may be gone); the step is retried when its heartbeat timeout (1m0s) passes, in 35 s"},
		{PendingActivity{Attempt: 1, MaxAttempts: 1, Worker: "w1", Started: ago(40), LastHeartbeat: ago(25), HeartbeatTimeout: time.Minute},
			"attempt 1 of 1 on worker w1, running 40 s, last heartbeat 25 s ago: no heartbeat for 25 s (worker w1 may be gone); the step fails (its last attempt) when its heartbeat timeout (1m0s) passes, in 35 s"},
		{PendingActivity{Attempt: 3, MaxAttempts: 5, LastFailure: "TASK_TIMEOUT: slow", NextAttempt: now.Add(4 * time.Second)},
			"attempt 2 failed (TASK_TIMEOUT: slow); attempt 3 of 5 starts in 4 s"},
		{PendingActivity{ActivityID: "step-flaky-retry-2-host-1", Attempt: 1, MaxAttempts: 1, Worker: "w2", Started: ago(3)},
			"attempt 1 of 1 after operator retry 2 on worker w2, running 3 s"},
	} {
		if got := c.pa.Line(now); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// Why a run's progress went unanswered, from its workflow task.
func TestWorkflowTaskWhy(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		task *WorkflowTask
		want string
	}{
		{nil, "the run's workers did not answer in time"},
		{&WorkflowTask{Started: true, Attempt: 1, Since: now.Add(-7 * time.Second)}, "a worker holds the run's workflow task, 7s so far (a local step runs, or that worker is gone)"},
		{&WorkflowTask{Attempt: 1, Since: now.Add(-40 * time.Second)}, "no worker has taken the run's workflow task for 40s (its worker may be gone)"},
		{&WorkflowTask{Started: true, Attempt: 6, Since: now}, "the run's workflow task failed 5 times and is retried (the worker's log says why)"},
	} {
		if got := c.task.Why(now); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// A running step's attempts are the server's while its attempt runs (the
// run counts them when it ends); an item's attempt is not its step's.
func TestLiveAttempts(t *testing.T) {
	r := Result{Steps: []StepResult{{ID: "a", Status: StepRunning}, {ID: "b", Status: StepRunning}, {ID: "c", Status: StepSucceeded, Attempts: 1}}}
	r.Live(&RunInfo{Pending: []PendingActivity{
		{ActivityID: "step-a-after-local", Attempt: 3, Heartbeat: &Heartbeat{Latest: &Feedback{Message: "50%"}}},
		{ActivityID: "step-b[2]", Attempt: 4},
		{ActivityID: "step-c", Attempt: 2},
	}})
	if a := r.Steps[0]; a.Attempts != 3 || a.Latest == nil || a.Latest.Message != "50%" {
		t.Errorf("a: %+v", a)
	}
	if r.Steps[1].Attempts != 0 || r.Steps[2].Attempts != 1 {
		t.Errorf("b, c: %+v", r.Steps[1:])
	}
}
