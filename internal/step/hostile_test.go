package step

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// A tool owns its step folder: links it leaves there under the names the
// worker writes and reads (its attempt records, its start record, a file
// the worker writes through a temporary one) lead nowhere: nothing
// outside the folder is written or read, and /dev/zero is not read at all.
func TestLinksAToolLeavesInItsFolder(t *testing.T) {
	stepDir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("untouched\n"), 0o644)
	for _, name := range []string{AttemptsFileName, "data.json.tmp", ".data.json.tmp-1"} {
		os.Symlink(victim, filepath.Join(stepDir, name))
	}
	recordAttempt(stepDir, report.Attempt{N: 1, Code: caperr.ToolFailure, Started: time.Now(), Ended: time.Now()})
	if err := runfolder.WriteAtomic(filepath.Join(stepDir, "data.json"), []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched\n" {
		t.Fatalf("the worker wrote through a link: %q", b)
	}
	if recs := attemptRecords(stepDir); len(recs) != 0 {
		t.Fatalf("attempt records read through a link: %+v", recs)
	}
	os.Remove(filepath.Join(stepDir, AttemptsFileName))
	os.Symlink("/dev/zero", filepath.Join(stepDir, AttemptsFileName))
	os.Symlink("/dev/zero", startedFile(stepDir))
	done := make(chan []report.Attempt)
	go func() { done <- attemptRecords(stepDir) }()
	select {
	case recs := <-done:
		if len(recs) != 0 {
			t.Fatalf("records from /dev/zero: %d", len(recs))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker reads /dev/zero")
	}
	r := &stepRun{in: wfapi.RunToolInput{Step: wfapi.StepCall{ID: "s"}}, stepDir: stepDir, attempt: 1}
	if err := r.claimStart("run"); caperr.CodeOf(err) != caperr.ObservabilityError || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("a start record that is a link to /dev/zero: %v", err)
	}
}
