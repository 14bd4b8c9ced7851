package activities

import (
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

func TestClaimStart(t *testing.T) {
	dir := t.TempDir()
	run := func(resetOf string, item *wfapi.ItemCall, runID string) error {
		r := &stepRun{in: wfapi.RunToolInput{ResetOf: resetOf, Step: wfapi.StepCall{ID: "charge", Item: item}}, attempt: 1, stepDir: dir}
		return r.claimStart(runID)
	}
	if err := run("", nil, "r1"); err != nil {
		t.Fatalf("first start: %v", err)
	}
	// Started again under another run ID without a reset: `run --id
	// --rerun` or an operator's retry. Recorded, not refused.
	if err := run("", nil, "r2"); err != nil {
		t.Fatalf("a rerun: %v", err)
	}
	// The same run again (a retry within the reset run) is no conflict.
	if err := run("r1", nil, "r2"); err != nil {
		t.Fatalf("same run: %v", err)
	}
	err := run("r1", nil, "r3")
	if caperr.CodeOf(err) != caperr.PolicyBlocked || !strings.Contains(err.Error(), "already started in run r2") || !strings.Contains(err.Error(), "reset from r1") {
		t.Fatalf("a reset run: %v", err)
	}
	// Items have records of their own.
	if err := run("r1", &wfapi.ItemCall{Index: 3}, "r3"); err != nil {
		t.Fatalf("an item never started: %v", err)
	}
	if err := run("r1", &wfapi.ItemCall{Index: 3}, "r4"); caperr.CodeOf(err) != caperr.PolicyBlocked || !strings.Contains(err.Error(), "charge[3]") {
		t.Fatalf("an item started by another run: %v", err)
	}
}
