package step

import (
	"fmt"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// Each attempt of a step leaves a line in the step's records, so the
// attempt that ends the step can tell the whole story: "attempt 1/3
// failed (TASK_TIMEOUT), waited 1s; attempt 2/3 succeeded".

// AttemptsFileName keeps a step's attempts (report.AttemptsFileName).
const AttemptsFileName = report.AttemptsFileName

// recordAttempt appends a failed attempt to a step's records (recDir);
// best effort.
func recordAttempt(recDir string, r report.Attempt) {
	// Its message cut as an envelope's is in history: one of megabytes
	// took the records past maxAttemptsFile, and every attempt's line was
	// then left unread (found attacking issue 57).
	r.Message = envelope.Truncate(r.Message, envelope.MaxMessage)
	_ = appendLine(recDir, AttemptsFileName, r)
}

// attemptStory is the feedback event that tells the earlier attempts of
// this one ("" when this is the first).
func attemptStory(recDir string, attempt, max int32, started time.Time, outcome string) *envelope.Feedback {
	if attempt <= 1 {
		return nil
	}
	records := attemptRecords(recDir)
	if records == nil {
		return nil
	}
	byAttempt := map[int32]report.Attempt{}
	for _, r := range records {
		if r.N < attempt {
			byAttempt[r.N] = r
		}
	}
	of := func(n int32) string {
		if max > 0 {
			return fmt.Sprintf("%d/%d", n, max)
		}
		return fmt.Sprint(n)
	}
	var parts []string
	for n := int32(1); n < attempt; n++ {
		r, ok := byAttempt[n]
		if !ok {
			parts = append(parts, fmt.Sprintf("attempt %s ended without a word (its worker stopped, or it timed out)", of(n)))
			continue
		}
		part := fmt.Sprintf("attempt %s failed (%s)", of(n), r.Code)
		if next, ok := byAttempt[n+1]; ok {
			part += fmt.Sprintf(", waited %s", next.Started.Sub(r.Ended).Round(100*time.Millisecond))
		} else if n+1 == attempt {
			part += fmt.Sprintf(", waited %s", started.Sub(r.Ended).Round(100*time.Millisecond))
		}
		parts = append(parts, part)
	}
	parts = append(parts, fmt.Sprintf("attempt %s %s", of(attempt), outcome))
	return &envelope.Feedback{Phase: "retry", Level: envelope.LevelInfo, Message: strings.Join(parts, "; "), Timestamp: envelope.Timestamp(envelope.Now())}
}

// maxAttemptsFile bounds a step's attempt records (a line each).
const maxAttemptsFile = 1 << 20

// attemptRecords reads the failed attempts a step's records hold (nil
// when there are none).
func attemptRecords(recDir string) []report.Attempt {
	// Beneath the folder, bounded, never through a link.
	raw, err := beneath.ReadFile(recDir, AttemptsFileName, maxAttemptsFile, "attempts")
	if err != nil {
		return nil
	}
	return report.ParseAttempts(raw)
}

// Transitions tells every step's history for report.json.
func Transitions(runDir string, steps []wfapi.StepResult) map[string][]report.Transition {
	out := make(map[string][]report.Transition, len(steps))
	for _, s := range steps {
		var recs []report.Attempt
		if s.Attempts > 1 || s.Status != wfapi.StepSucceeded {
			// A step that succeeded at once is told by its end: its record
			// adds nothing, and most steps are such (a file open each,
			// every run). One cancelled in its backoff counts one attempt
			// but recorded its failed ones.
			recs = attemptRecords(runfolder.Records(runDir, s.ID, -1))
		}
		out[s.ID] = report.Transitions(s, recs)
	}
	return out
}

// NearTimeout is the share of its timeout past which a step's envelope
// carries a warning: the next run of it, a little slower, would fail.
const NearTimeout = 0.8

// nearTimeout warns of an attempt that used NearTimeout or more of its
// start-to-close timeout (nil otherwise).
func nearTimeout(took, timeout time.Duration) *envelope.Feedback {
	if timeout <= 0 || float64(took) < NearTimeout*float64(timeout) {
		return nil
	}
	return &envelope.Feedback{Phase: "timeout", Level: envelope.LevelWarning, Timestamp: envelope.Timestamp(envelope.Now()),
		Message: fmt.Sprintf("the attempt took %s, %.0f%% of its %s timeout: raise the step's timeout (or the tool's timeouts.start_to_close) before it fails",
			took.Round(time.Millisecond), 100*float64(took)/float64(timeout), timeout)}
}

// notRetried says why a failed attempt is the last when it was not for
// want of attempts: its code is never retried, or the tool is not
// idempotent (another attempt could repeat what the first did; such a
// step gets one attempt). "" when it will be retried or used its
// attempts.
func notRetried(code caperr.Code, idempotent bool, attempt, max int32) string {
	switch {
	case !caperr.Lookup(code).Retryable && attempt < max:
		return fmt.Sprintf("not retried: %s is never retried", code)
	case !idempotent:
		return "not retried: the tool is not idempotent (another attempt could repeat its effects)"
	}
	return ""
}
