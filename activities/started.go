package activities

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// A non-idempotent step (think "charge a card") must not run twice. Within
// a run, Temporal and capflow see to it (no retries, no rerun to re-create
// an output). A run reset with `temporal workflow reset` is a new run of
// the same workflow that replays its original's history up to the reset
// point and goes on from there: a step that ran after that point would
// start again, while the new history says nothing of the first time. The
// step's folder, which a reset does not touch, keeps who started it.

// startedFile is the record of the run that last started a
// non-idempotent step (or one of its items).
func startedFile(stepDir string, item *int) string {
	if item != nil {
		return filepath.Join(stepDir, fmt.Sprintf("started-%d.json", *item))
	}
	return filepath.Join(stepDir, "started.json")
}

// startRecord is what startedFile holds.
type startRecord struct {
	RunID   string    `json:"run_id"`
	Attempt int32     `json:"attempt"`
	Started time.Time `json:"started"`
}

// claimStart records that runID starts this attempt of a non-idempotent
// step, unless this run was reset from another (r.in.ResetOf) and another
// run started it already: then it refuses with POLICY_BLOCKED, naming
// both. An operator's retry sends no ResetOf and always runs.
func (r *stepRun) claimStart(runID string) error {
	var item *int
	if it := r.in.Step.Item; it != nil {
		item = &it.Index
	}
	path := startedFile(r.stepDir, item)
	if r.in.ResetOf != "" {
		var prev startRecord
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &prev) == nil && prev.RunID != "" && prev.RunID != runID {
			return caperr.New(caperr.PolicyBlocked,
				"%s is not idempotent and already started in run %s (attempt %d, %s); this run was reset from %s (temporal workflow reset), so it is not started again: `capflow retry` runs it anyway (with on_failure: ask the run waits for that)",
				r.label(), prev.RunID, prev.Attempt, prev.Started.UTC().Format(time.RFC3339), r.in.ResetOf)
		}
	}
	b, _ := json.Marshal(startRecord{RunID: runID, Attempt: r.attempt, Started: time.Now()})
	if err := os.MkdirAll(r.stepDir, 0o755); err != nil {
		return caperr.Wrap(caperr.ObservabilityError, err, "recording the start of a non-idempotent step")
	}
	if err := writeAtomic(path, b); err != nil {
		return caperr.Wrap(caperr.ObservabilityError, err, "recording the start of a non-idempotent step")
	}
	return nil
}

// label names the step, or the item, in messages.
func (r *stepRun) label() string {
	if it := r.in.Step.Item; it != nil {
		return fmt.Sprintf("%s[%d]", r.in.Step.ID, it.Index)
	}
	return r.in.Step.ID
}
