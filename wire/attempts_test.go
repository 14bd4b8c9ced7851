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
