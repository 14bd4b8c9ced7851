package workflows

import (
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
)

// How many attempts a step's first way makes.
func TestFirstAttempts(t *testing.T) {
	for _, c := range []struct {
		name               string
		way                wayKind
		max, localAttempts int
		want               int32
	}{
		{"local, fewer than its local attempts", wayLocal, 2, 3, 2},
		{"local, more: the rest go on as an activity", wayLocal, 10, 3, 3},
		{"local, no attempts named: one", wayLocal, 0, 3, 1},
		{"eager: one on the workflow's queue", wayEager, 5, 3, 1},
		{"regular: all of them", wayRegular, 5, 3, 5},
	} {
		if got := firstAttempts(c.way, c.max, c.localAttempts); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// When a step goes on as a regular activity after its first way.
func TestGoesOn(t *testing.T) {
	failed := firstEnd{failed: true, retryable: true, left: 2}
	for _, c := range []struct {
		name string
		end  func(firstEnd) firstEnd
		want bool
	}{
		{"failed with attempts left", func(e firstEnd) firstEnd { return e }, true},
		{"succeeded", func(e firstEnd) firstEnd { e.failed = false; return e }, false},
		{"no attempts left", func(e firstEnd) firstEnd { e.left = 0; return e }, false},
		{"a failure not to retry", func(e firstEnd) firstEnd { e.retryable = false; return e }, false},
		{"on the wrong host, no attempts left: its attempts were not spent", func(e firstEnd) firstEnd { e.wrongHost, e.left, e.retryable = true, 0, false; return e }, true},
		{"being stopped", func(e firstEnd) firstEnd { e.stopping = true; return e }, false},
		{"on the wrong host while stopped", func(e firstEnd) firstEnd { e.wrongHost, e.stopping = true, true; return e }, false},
		{"past the run's deadline", func(e firstEnd) firstEnd { e.late = true; return e }, false},
	} {
		if got := goesOn(c.end(failed)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// After tried failed attempts the rest wait as the policy would have:
// the wait after attempt tried, then on from the next interval (or, for
// local attempts recorded before local-backoff, at once from the first).
func TestContinuation(t *testing.T) {
	doubling := temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 5}
	for _, c := range []struct {
		name       string
		in         temporal.RetryPolicy
		tried      int32
		backoff    bool
		wait, next time.Duration
	}{
		{"after one", doubling, 1, true, time.Second, 2 * time.Second},
		{"after three", doubling, 3, true, 4 * time.Second, 8 * time.Second},
		{"capped by the maximum", temporal.RetryPolicy{InitialInterval: 40 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute}, 1, true, 40 * time.Second, time.Minute},
		{"no growth", temporal.RetryPolicy{InitialInterval: 3 * time.Second, BackoffCoefficient: 1}, 2, true, 3 * time.Second, 3 * time.Second},
		{"no interval named: Temporal's 1s", temporal.RetryPolicy{BackoffCoefficient: 2}, 1, true, time.Second, 2 * time.Second},
		{"before local-backoff: at once, from the first", doubling, 3, false, 0, time.Second},
	} {
		next, wait := continuation(c.in, c.tried, 2, c.backoff)
		if wait != c.wait || next.InitialInterval != c.next || next.MaximumAttempts != 2 || next.BackoffCoefficient != c.in.BackoffCoefficient {
			t.Errorf("%s: wait %s, then %+v", c.name, wait, next)
		}
	}
}

// Local attempts are bounded together: each its timeout and slack, and
// the waits between them.
func TestLocalBudget(t *testing.T) {
	r := temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3}
	if got, want := localBudget(r, 10*time.Second), 3*(10*time.Second+localSlack)+time.Second+2*time.Second; got != want {
		t.Errorf("budget %s, want %s", got, want)
	}
	if got := localBudget(r, 0); got != 0 {
		t.Errorf("no timeout: budget %s, want none", got)
	}
}

// A step whose attempts reached its maximum with a failure that could be
// retried exhausted its retries.
func TestExhaustedBy(t *testing.T) {
	for _, c := range []struct {
		attempts, max int
		retryable     bool
		want          bool
	}{{3, 3, true, true}, {2, 3, true, false}, {3, 3, false, false}, {4, 3, true, true}} {
		if got := exhaustedBy(c.attempts, c.max, c.retryable); got != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
}

// Local retries whose back-off passes a workflow task wait outside it.
func TestRetriesOutside(t *testing.T) {
	for _, c := range []struct {
		r    temporal.RetryPolicy
		want bool
	}{
		{temporal.RetryPolicy{MaximumAttempts: 1, InitialInterval: time.Hour}, false},
		{temporal.RetryPolicy{MaximumAttempts: 2}, false}, // 1 s
		{temporal.RetryPolicy{MaximumAttempts: 2, InitialInterval: 11 * time.Second}, true},
		{temporal.RetryPolicy{MaximumAttempts: 3, InitialInterval: 6 * time.Second, BackoffCoefficient: 2}, true}, // 6 s, then 12
		{temporal.RetryPolicy{MaximumAttempts: 3, InitialInterval: 6 * time.Second, BackoffCoefficient: 2, MaximumInterval: 8 * time.Second}, false},
	} {
		if got := retriesOutside(c.r, 10*time.Second); got != c.want {
			t.Errorf("%+v: %v, want %v", c.r, got, c.want)
		}
	}
}
