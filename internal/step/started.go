package step

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// A non-idempotent step (think "charge a card") must not run twice. Within
// a run, Temporal and capflow see to it (no retries, no rerun to re-create
// an output). A run reset with `temporal workflow reset` is a new run of
// the same workflow that replays its original's history up to the reset
// point and goes on from there: a step that ran after that point starts
// again (and one that was running then is sent out again), while the new
// history says nothing of the first time. The step's folder, which a reset
// does not touch, keeps which run of the chain (wfapi.RunToolInput.Lineage)
// started it, in the step's records, where its tool cannot write.

// startedFile is the record of the run that last started a
// non-idempotent step or item (an item's records are its own).
func startedFile(recDir string) string { return filepath.Join(recDir, "started.json") }

// startRecord is what startedFile holds.
type startRecord struct {
	RunID   string    `json:"run_id"`
	Lineage string    `json:"lineage,omitempty"`
	Retry   int       `json:"retry,omitempty"`
	Attempt int32     `json:"attempt"`
	Started time.Time `json:"started"`
}

// claimStart records that runID starts this attempt of a non-idempotent
// step, unless another run of the same chain started it already and no
// operator retried it since: then it refuses with POLICY_BLOCKED, naming
// that run. A record it cannot read refuses too: the guard fails closed.
func (r *stepRun) claimStart(runID string) error {
	path := startedFile(r.recDir)
	var prev startRecord
	// Beneath the records and bounded: never through a link.
	var b []byte
	_, err := os.Lstat(path)
	if err == nil {
		b, err = beneath.ReadFile(r.recDir, filepath.Base(path), 64<<10, "start record")
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil || json.Unmarshal(b, &prev) != nil:
		return caperr.New(caperr.ObservabilityError, "%s is not idempotent, and the record of the run that last started it (%s) cannot be read: it is not started blindly", r.label(), path)
	case r.in.Lineage != "" && prev.Lineage == r.in.Lineage && prev.RunID != runID && r.in.Retry <= prev.Retry:
		return caperr.New(caperr.PolicyBlocked, "%s is not idempotent and already started in run %s of this workflow (attempt %d, %s); this run (%s) came from it by a reset (temporal workflow reset), so it is not started again: %s",
			r.label(), prev.RunID, prev.Attempt, prev.Started.UTC().Format(time.RFC3339), runID, r.override())
	}
	b, _ = json.Marshal(startRecord{RunID: runID, Lineage: r.in.Lineage, Retry: r.in.Retry, Attempt: r.attempt, Started: time.Now()})
	if err := os.MkdirAll(r.recDir, 0o755); err != nil {
		return caperr.Wrap(caperr.ObservabilityError, err, "recording the start of a non-idempotent step")
	}
	if err := runfolder.WriteAtomic(path, b); err != nil {
		return caperr.Wrap(caperr.ObservabilityError, err, "recording the start of a non-idempotent step")
	}
	return nil
}

// override says how to run a refused step anyway.
func (r *stepRun) override() string {
	if r.in.Step.Item != nil {
		return "an item cannot be retried alone; `capflow rerun` starts the run again"
	}
	return "`capflow retry` runs it anyway (with on_failure: ask the run waits for that)"
}

// label names the step, or the item, in messages.
func (r *stepRun) label() string { return label(r.in.Step) }

// label names a step, or an item as id[index].
func label(s wfapi.StepCall) string {
	if s.Item != nil {
		return wfapi.ItemLabel(s.ID, s.Item.Index)
	}
	return s.ID
}
