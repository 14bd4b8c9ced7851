package step

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/toolrun"
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
	r := &stepRun{in: wfapi.RunToolInput{Step: wfapi.StepCall{ID: "s"}}, stepDir: stepDir, recDir: stepDir, attempt: 1}
	if err := r.claimStart("run"); caperr.CodeOf(err) != caperr.ObservabilityError || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("a start record that is a link to /dev/zero: %v", err)
	}
}

// swapping is a tool whose write folder out/deep is swapped for a link
// to another folder while it runs (another step with write: [out] can),
// and that then names a file "in" it.
type swapping struct{ project, outside string }

func (s swapping) Run(ctx context.Context, req toolrun.Request) envelope.Envelope {
	deep := filepath.Join(s.project, "out", "deep")
	_ = os.Rename(deep, deep+".bak")
	_ = os.Symlink(s.outside, deep)
	return envelope.NewBuilder(req.Manifest.Name).Succeed("ok", map[string]any{"file": filepath.Join(deep, "secret.txt")})
}

// A write folder is opened before its tool starts and its output files
// are read beneath that handle: a folder swapped for a link meanwhile
// fails the step INVALID_INPUT, and nothing of where the link leads is
// stored (hostile findings at 6003afe, 3).
func TestWriteFolderSwappedForALink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	secret := []byte("the worker's secret\n")
	os.WriteFile(filepath.Join(outside, "secret.txt"), secret, 0o600)
	os.MkdirAll(filepath.Join(root, "tools", "wdeep"), 0o755)
	os.WriteFile(filepath.Join(root, "tools", "wdeep", "tool.yaml"), []byte(`name: wdeep
version: 1.0.0
description: writes a file in out/deep
capabilities: [test.wdeep]
input_schema: {type: object}
output_schema: {type: object, properties: {file: {type: string, format: path}}}
entrypoint: {type: command, command: [./run.sh]}
sandbox: {write: [out/deep]}
idempotent: true
`), 0o644)
	e, store := executorOf(t, root, swapping{root, outside})
	reg, _ := e.Registry()
	m := reg.Tool("wdeep", "")
	if m == nil {
		t.Fatalf("no wdeep: %v", reg.Problems)
	}
	in := wfapi.RunToolInput{WorkflowID: "r", RunDir: e.RunDir("r"), Step: wfapi.StepCall{ID: "a", Tool: m.Name, Version: m.Version, Digest: m.Digest, Idempotent: true, With: map[string]any{}}}
	_, err := e.Run(context.Background(), in, Attempt{Number: 1, Max: 1})
	var failed *Failed
	if !errors.As(err, &failed) || failed.Code != caperr.InvalidInput || !strings.Contains(err.Error(), "was replaced while the step ran") {
		t.Fatalf("the swapped folder: %v", err)
	}
	sum := sha256.Sum256(secret)
	if _, err := store.Get(context.Background(), hex.EncodeToString(sum[:]), 1<<20); err == nil {
		t.Fatal("the secret reached the artifact store")
	}
}
