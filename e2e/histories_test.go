package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"
)

// Recording runs' histories for the replay tests
// (CAPFLOW_RECORD_HISTORIES=1, make record-histories).

// recordHistory writes a run's history into workflows/testdata/histories
// when CAPFLOW_RECORD_HISTORIES=1, for the replay test.
func recordHistory(t *testing.T, workflowID, name string) {
	recordRun(t, workflowID, "", name)
}

// recordChange records, when CAPFLOW_RECORD_HISTORIES=1, the first run
// that asked for a workflow change (workflows/versions.go): of each
// workflow in ids, its chain of runs from its first. The test fails when
// none did.
func recordChange(t *testing.T, change, name string, ids ...string) {
	if os.Getenv("CAPFLOW_RECORD_HISTORIES") != "1" {
		return
	}
	for _, id := range ids {
		runID := ""
		if d, err := h.client.DescribeWorkflowExecution(context.Background(), id, ""); err == nil {
			runID = d.GetWorkflowExecutionInfo().GetFirstRunId()
		}
		for i := 0; runID != "" && i < 100; i++ {
			asked, next := askedChange(t, id, runID, change)
			if asked {
				recordRun(t, id, runID, name)
				return
			}
			runID = next
		}
	}
	t.Errorf("no run of %v asked for change %s", ids, change)
}

// askedChange reports whether a run's history has a Version marker of
// change, and the run it continued as.
func askedChange(t *testing.T, id, runID, change string) (bool, string) {
	it := h.client.GetWorkflowHistory(context.Background(), id, runID, false, 0)
	asked, next := false, ""
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			next = a.GetNewExecutionRunId()
		}
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "Version" {
			continue
		}
		var got string
		if converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &got) == nil && got == change {
			asked = true
		}
	}
	return asked, next
}

// recordRun records one run of a workflow ("": the latest).
func recordRun(t *testing.T, workflowID, runID, name string) {
	if os.Getenv("CAPFLOW_RECORD_HISTORIES") != "1" {
		return
	}
	tbin, _ := temporalBinary(h.repo)
	args := []string{"workflow", "show", "--address", h.address, "-w", workflowID, "--output", "json"}
	if runID != "" {
		args = append(args, "-r", runID)
	}
	out, err := exec.Command(tbin, args...).Output()
	if err != nil {
		t.Fatalf("record history: %v", err)
	}
	dst := historyFile(name)
	if dst == "" {
		t.Logf("history %s: kept as recorded (label taken)", name)
		return
	}
	if len(out) > 512<<10 {
		// A run that carries large inputs has megabytes of history: kept
		// gzipped (the replay test reads both).
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(out)
		_ = zw.Close()
		dst, out = dst+".gz", b.Bytes()
	}
	_ = os.MkdirAll(filepath.Dir(dst), 0o755)
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// historyFile is where a new recording of name goes. Recorded histories
// are never overwritten (each guards the workflow code it was recorded
// with): a name taken gets the label CAPFLOW_HISTORY_LABEL, or the
// commit's short hash; "" when that is taken too.
func historyFile(name string) string {
	dir := filepath.Join(h.repo, "workflows/testdata/histories")
	dst := filepath.Join(dir, name+".json")
	if !fileExists(dst) && !fileExists(dst+".gz") {
		return dst
	}
	label := os.Getenv("CAPFLOW_HISTORY_LABEL")
	if label == "" {
		out, _ := exec.Command("git", "-C", h.repo, "rev-parse", "--short", "HEAD").Output()
		label = strings.TrimSpace(string(out))
	}
	if dst = filepath.Join(dir, name+"."+label+".json"); label == "" || fileExists(dst) || fileExists(dst+".gz") {
		return ""
	}
	return dst
}
