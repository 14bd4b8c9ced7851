package step

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

func TestClaimStart(t *testing.T) {
	dir := t.TempDir()
	start := func(lineage string, retry int, runID string) error {
		r := &stepRun{in: wfapi.RunToolInput{Lineage: lineage, Retry: retry, Step: wfapi.StepCall{ID: "charge"}}, attempt: 1, stepDir: dir, recDir: dir}
		return r.claimStart(runID)
	}
	for _, c := range []struct {
		what           string
		lineage, runID string
		retry          int
		refused        bool
	}{
		{"the first start", "L1", "r1", 0, false},
		{"the same run again", "L1", "r1", 0, false},
		{"a reset run (same chain, another run)", "L1", "r2", 0, true},
		{"an operator's retry in the reset run", "L1", "r2", 1, false},
		{"a reset to before that retry's attempt ended", "L1", "r3", 1, true},
		{"`run --id --rerun`: a new chain", "L2", "r4", 0, false},
		{"a reset of the rerun", "L2", "r5", 0, true},
	} {
		err := start(c.lineage, c.retry, c.runID)
		if refused := caperr.CodeOf(err) == caperr.PolicyBlocked; refused != c.refused {
			t.Fatalf("%s: %v", c.what, err)
		}
		if c.refused && (!strings.Contains(err.Error(), "already started in run r") || !strings.Contains(err.Error(), "capflow retry")) {
			t.Fatalf("%s: %v", c.what, err)
		}
	}
	// An unreadable record: refused, not started blindly.
	_ = os.WriteFile(filepath.Join(dir, "started.json"), []byte("{not json"), 0o644)
	if err := start("L2", 0, "r6"); caperr.CodeOf(err) != caperr.ObservabilityError {
		t.Fatalf("an unreadable record: %v", err)
	}
	// An item says how it can run again.
	item := &stepRun{in: wfapi.RunToolInput{Lineage: "L", Step: wfapi.StepCall{ID: "charge", Item: &wfapi.ItemCall{Index: 3}}}, attempt: 1, recDir: t.TempDir()}
	_ = item.claimStart("a")
	if err := item.claimStart("b"); caperr.CodeOf(err) != caperr.PolicyBlocked || !strings.Contains(err.Error(), "charge[3]") || !strings.Contains(err.Error(), "capflow rerun") {
		t.Fatalf("an item: %v", err)
	}
}
