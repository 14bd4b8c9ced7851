package wire

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Overdue is how long without a heartbeat says a step's worker may be
// gone: a worker heartbeats its steps every 2 s.
const Overdue = 10 * time.Second

// Line says where a running step's attempt is, as Temporal knows
// it: attempt N of M, the worker holding it, its last heartbeat; once
// that heartbeat is overdue, that its worker may be gone and when it is
// retried; while it waits out a back-off, when the next attempt starts.
func (pa PendingActivity) Line(now time.Time) string {
	of := fmt.Sprintf("attempt %d", max(pa.Attempt, 1))
	if pa.MaxAttempts > 0 {
		of += fmt.Sprintf(" of %d", pa.MaxAttempts)
	}
	if m := operatorRetry.FindStringSubmatch(pa.ActivityID); m != nil {
		of += " after operator retry " + m[1]
	}
	if !pa.NextAttempt.IsZero() && pa.NextAttempt.After(now) {
		line := fmt.Sprintf("%s starts in %s", of, secs(pa.NextAttempt.Sub(now)))
		if pa.LastFailure != "" {
			line = fmt.Sprintf("attempt %d failed (%s); %s", max(pa.Attempt-1, 1), firstLine(pa.LastFailure), line)
		}
		return line
	}
	if pa.Started.IsZero() {
		return of + ": waiting for a worker to take it"
	}
	line := of
	if pa.Worker != "" {
		line += " on worker " + pa.Worker
	}
	line += ", running " + secs(now.Sub(pa.Started))
	last := pa.LastHeartbeat
	if last.Before(pa.Started) {
		last = pa.Started
	}
	silent := now.Sub(last)
	if !pa.LastHeartbeat.IsZero() && pa.LastHeartbeat.After(pa.Started) {
		line += ", last heartbeat " + secs(silent) + " ago"
	}
	if silent < Overdue || pa.HeartbeatTimeout <= 0 {
		return line
	}
	worker := "its worker"
	if pa.Worker != "" {
		worker = "worker " + pa.Worker
	}
	left := pa.HeartbeatTimeout - silent
	when := "now"
	if left > 0 {
		when = "in " + secs(left)
	}
	then := "the step is retried"
	if pa.MaxAttempts > 0 && pa.Attempt >= pa.MaxAttempts {
		then = "the step fails (its last attempt)" // not idempotent, or retries used up
	}
	return fmt.Sprintf("%s: no heartbeat for %s (%s may be gone); %s when its heartbeat timeout (%s) passes, %s",
		line, secs(silent), worker, then, secs(pa.HeartbeatTimeout), when)
}

// operatorRetry finds the operator retry an activity runs for (its ID's
// "-retry-N", see LabelOfActivity).
var operatorRetry = regexp.MustCompile(`-retry-(\d+)`)

// secs is a duration as a person reads it: whole seconds, or minutes and
// seconds.
func secs(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	return d.String()
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
