package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// putTestBlob stores v as the workflow would (a sealed blob of the run
// folder) and returns its reference.
func putTestBlob(t *testing.T, runDir, name string, v any) wfapi.Blob {
	t.Helper()
	raw, _ := json.Marshal(v)
	if err := os.MkdirAll(filepath.Join(runDir, BlobDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, BlobDir, name), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return wfapi.Blob{Name: name, SHA256: hex.EncodeToString(sum[:]), Size: len(raw), Parts: 1}
}

// A spilled step input is read back from the run folder, digest checked;
// an altered one fails the step with OBSERVABILITY_ERROR, nothing run.
func TestSpilledInputs(t *testing.T) {
	a, root := newActivities(t)
	e := env(a)
	reg, _ := a.registry()
	m := reg.Tool("text-render", "")
	runDir := filepath.Join(root, ".capflow/runs", testRun)
	big := strings.Repeat("b", 300<<10)
	b := putTestBlob(t, runDir, "input-0123456789abcdef.json", wfapi.Spill{
		With: map[string]any{"template": "${inputs.big}"}, Inputs: map[string]any{"big": big}})
	in := wfapi.RunToolInput{WorkflowID: testRun, RunDir: runDir, Spilled: &b,
		Step: wfapi.StepCall{ID: "render", Tool: m.Name, Version: m.Version, Digest: m.Digest, Idempotent: true}}
	v, err := e.ExecuteActivity(a.RunTool, in)
	if err != nil {
		t.Fatal(err)
	}
	var out wfapi.RunToolResult
	_ = v.Get(&out)
	raw, err := os.ReadFile(out.DataFile)
	if err != nil || !strings.Contains(string(raw), big) {
		t.Fatalf("the rendered text lacks the spilled input: %v", err)
	}

	d := putTestBlob(t, runDir, "decide-0123456789abcdef.json", wfapi.EvaluateInput{StepID: "d", When: "size(inputs.big) > 1000", Inputs: map[string]any{"big": big}})
	v, err = e.ExecuteActivity(a.Evaluate, wfapi.EvaluateInput{StepID: "d", Spilled: &d})
	var dec wfapi.EvaluateResult
	if err != nil || v.Get(&dec) != nil || !dec.Run {
		t.Fatalf("decide over a spilled input: %v %+v", err, dec)
	}

	if err := os.WriteFile(filepath.Join(runDir, BlobDir, b.Name), []byte(`{"with":{"template":"forged"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = e.ExecuteActivity(a.RunTool, in)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(caperr.ObservabilityError) || !strings.Contains(app.Message(), "missing or altered") {
		t.Fatalf("an altered spilled input: %v", err)
	}
}

// Finalize reads each earlier segment's steps from the checkpoint whose
// digest the workflow recorded; an altered one makes the report say so,
// its steps are never taken.
func TestFinalizeChecksCheckpoints(t *testing.T) {
	a, root := newActivities(t)
	e := env(a)
	runDir := filepath.Join(root, ".capflow/runs", testRun)
	steps := []wfapi.StepResult{{ID: "a", Capability: "x.a", Status: wfapi.StepSucceeded, Attempts: 1}}
	cp := putTestBlob(t, runDir, "segment-1.json", steps)
	// Steps and resolution carried, never stored (a small plan's).
	rr := &wfapi.ResolveResult{Plan: "p", Steps: []wfapi.ResolvedStep{{ID: "a", Capability: "x.a"}, {ID: "b", Capability: "x.b"}},
		Resolution: []wire.Resolution{{StepID: "a", Capability: "x.a", Tool: "tool-a"}, {StepID: "b", Capability: "x.b", Tool: "tool-b"}}}
	fin := wfapi.FinalizeInput{Result: wfapi.Result{Status: wfapi.StatusPassed, Plan: "p", WorkflowID: testRun, Message: "ok",
		Steps: []wfapi.StepResult{{ID: "b", Capability: "x.b", Status: wfapi.StepSucceeded, Attempts: 1}}},
		Resolved: rr, Segments: 1, Checkpoints: []wfapi.Blob{cp}}
	read := func() string {
		t.Helper()
		v, err := e.ExecuteActivity(a.Finalize, fin)
		if err != nil {
			t.Fatal(err)
		}
		var paths wfapi.ReportPaths
		_ = v.Get(&paths)
		js, _ := os.ReadFile(paths.JSON)
		return string(js)
	}
	js := read()
	if strings.Contains(js, "report incomplete") || !strings.Contains(js, `"id": "a"`) {
		t.Fatalf("a checked checkpoint: %.600s", js)
	}
	var doc struct {
		Result wfapi.Result `json:"result"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Result.Resolution) != 2 {
		t.Fatalf("the report's result lists %d resolutions (%v), want the 2 carried", len(doc.Result.Resolution), err)
	}
	forged := []wfapi.StepResult{{ID: "a", Capability: "x.a", Status: wfapi.StepFailed, Attempts: 9}}
	raw, _ := json.Marshal(forged)
	if err := os.WriteFile(filepath.Join(runDir, BlobDir, "segment-1.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if js := read(); !strings.Contains(js, "segment 1 of the run is unreadable: segment-1.json in the run folder is missing or altered") || strings.Contains(js, `"attempts": 9`) {
		t.Fatalf("an altered checkpoint: %.800s", js)
	}
}

// A blob sealed on one host goes into a shared store; a host that lacks it
// (the run moved) reads it from there, checked against its digest.
func TestBlobsFollowTheRunThroughASharedStore(t *testing.T) {
	store, err := artifacts.Open(context.Background(), artifacts.Options{URL: "file://" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, root := newActivities(t)
	a.Exec.Artifacts = store
	e := env(a)
	raw := []byte(`{"with":{"template":"moved"}}`)
	sum := sha256.Sum256(raw)
	b := wfapi.Blob{Name: "input-0123456789abcdef.json", Size: len(raw), SHA256: hex.EncodeToString(sum[:]), Parts: 1}
	if _, err := e.ExecuteActivity(a.PutBlob, wfapi.PutBlobInput{Name: b.Name, Data: raw, Seal: &b}); err != nil {
		t.Fatal(err)
	}
	// The host's disk is lost: the blob is read from the store.
	if err := os.RemoveAll(filepath.Join(root, ".capflow")); err != nil {
		t.Fatal(err)
	}
	v, err := e.ExecuteActivity(a.GetBlob, wfapi.GetBlobInput{Name: b.Name, Part: 0, SHA256: b.SHA256})
	var got []byte
	if err != nil || v.Get(&got) != nil || string(got) != string(raw) {
		t.Fatalf("blob from the store: %q %v", got, err)
	}
	var sp wfapi.Spill
	if err := os.Remove(filepath.Join(root, ".capflow", "runs", testRun, BlobDir, b.Name)); err != nil {
		t.Fatal(err)
	}
	if err := a.readBlob(context.Background(), filepath.Join(root, ".capflow", "runs", testRun), b, &sp); err != nil || sp.With["template"] != "moved" {
		t.Fatalf("readBlob from the store: %v %+v", err, sp)
	}
}
