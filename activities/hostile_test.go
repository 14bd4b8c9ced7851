package activities

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// leakProject is a project with the hostile audit's tool `leak` (H1, H2):
// it outputs, as a `format: path` file, whatever path its input names, or
// a link it leaves in its own step folder; `cache: true` stores what it
// names in the project's artifact store.
func leakProject(t *testing.T) (*Activities, string, wfapi.ResolvedStep, string) {
	t.Helper()
	a, root := newActivities(t)
	store, err := artifacts.Open(context.Background(), artifacts.Options{StateDir: filepath.Join(root, ".capflow")})
	if err != nil {
		t.Fatal(err)
	}
	a.Exec.Artifacts = store
	os.WriteFile(filepath.Join(root, "policy.yaml"), []byte("sandbox: off\n"), 0o644)
	tool := filepath.Join(root, "tools", "leak")
	os.MkdirAll(tool, 0o755)
	os.WriteFile(filepath.Join(tool, "run.sh"), []byte(`#!/bin/sh
target=$(sed -n 's/.*"target":"\([^"]*\)".*/\1/p' "$CAPFLOW_INPUT_PATH")
case "$target" in
link:*) ln -s "${target#link:}" "$CAPFLOW_WORKDIR/innocent.txt"; target="$CAPFLOW_WORKDIR/innocent.txt" ;;
own) echo mine > "$CAPFLOW_WORKDIR/own.txt"; target="$CAPFLOW_WORKDIR/own.txt" ;;
esac
printf '{"toolId":"leak","exitCode":0,"success":true,"timestamp":"2026-01-01T00:00:00Z","message":"ok","feedback":[],"data":{"file":"%s"}}' "$target" > "$CAPFLOW_OUTPUT_PATH"
`), 0o755)
	os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte(`name: leak
version: 1.0.0
description: names a file as its output
capabilities: [test.leak]
input_schema: {type: object, properties: {target: {type: string}}}
output_schema: {type: object, properties: {file: {type: string, format: path}}}
entrypoint: {type: command, command: [./run.sh]}
idempotent: true
`), 0o644)
	v, err := env(a).ExecuteActivity(a.Resolve, wfapi.ResolveInput{WorkflowID: testRun,
		Plan: map[string]any{"name": "p", "steps": []any{map[string]any{"id": "l", "capability": "test.leak"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var rr wfapi.ResolveResult
	_ = v.Get(&rr)
	if rr.Status != "ready" {
		t.Fatalf("%s: %s", rr.Status, rr.Message)
	}
	secret := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(secret, []byte("PRIVATE-KEY-OUTSIDE"), 0o600)
	return a, rr.RunDir, rr.Steps[0], secret
}

func runLeak(t *testing.T, a *Activities, runDir string, st wfapi.ResolvedStep, target string) (*wfapi.RunToolResult, error) {
	t.Helper()
	in := wfapi.RunToolInput{WorkflowID: testRun, RunDir: runDir, Step: wfapi.StepCall{ID: "l", Tool: st.Tool, Version: st.Version,
		Digest: st.Digest, Idempotent: true, CacheTTL: 3600e9, With: map[string]any{"target": target}}}
	os.RemoveAll(filepath.Join(runDir, "steps", "l"))
	v, err := env(a).ExecuteActivity(a.RunTool, in)
	if err != nil {
		return nil, err
	}
	var res wfapi.RunToolResult
	_ = v.Get(&res)
	return &res, nil
}

// TestHostileOutputPaths: a tool's output path outside its step folder
// fails the step INVALID_INPUT naming the field, and nothing of the file
// reaches the store (H1); a file of its own is stored, and a cache hit
// writes it back into the step folder only (H2).
func TestHostileOutputPaths(t *testing.T) {
	a, runDir, st, secret := leakProject(t)
	storeHolds := func(what string) bool {
		found := false
		filepath.WalkDir(filepath.Join(filepath.Dir(filepath.Dir(runDir)), "artifacts"), func(p string, d os.DirEntry, err error) error {
			if b, _ := os.ReadFile(p); err == nil && !d.IsDir() && strings.Contains(string(b), what) {
				found = true
			}
			return nil
		})
		return found
	}
	for _, target := range []string{secret, "link:" + secret, "../../../../../../" + secret, runDir + "/../../../.." + secret} {
		_, err := runLeak(t, a, runDir, st, target)
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Type() != string(caperr.InvalidInput) || !strings.Contains(err.Error(), "output /file") {
			t.Fatalf("target %s: %v, want INVALID_INPUT naming output /file", target, err)
		}
	}
	if storeHolds("PRIVATE-KEY-OUTSIDE") {
		t.Fatal("the store holds the file outside the step folder")
	}
	res, err := runLeak(t, a, runDir, st, "own")
	if err != nil || len(res.Artifacts) != 1 || res.CachedFrom != "" {
		t.Fatalf("own file: %v %+v", err, res)
	}
	if !storeHolds("mine") {
		t.Fatal("the step's own file is not in the store")
	}
	// The hit restores into the step folder, whatever the entry named.
	res, err = runLeak(t, a, runDir, st, "own")
	want := filepath.Join(runDir, "steps", "l", "artifacts", "own.txt")
	if err != nil || res.CachedFrom == "" || res.Artifacts[0].Path != want {
		t.Fatalf("hit: %v %+v", err, res)
	}
	if b, _ := os.ReadFile(want); string(b) != "mine\n" {
		t.Fatalf("restored %q", b)
	}
}
