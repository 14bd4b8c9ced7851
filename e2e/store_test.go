package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// With a shared artifact store, a run whose host dies goes on on another
// host with its own copy of the project, reading what a finished step
// stored from the store: the producer, which is not idempotent and so
// could never run again, ran once. (Without the store the consumer finds
// the producer's data on the lost host, and the run fails.)
func TestSharedStoreCarriesDataAcrossHosts(t *testing.T) {
	const queue = "capflow-store"
	tool := filepath.Join(h.project, "tools", "big-once")
	if err := os.MkdirAll(tool, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tool)
	manifest := `name: big-once
version: 1.0.0
description: Outputs 300 KB of data, not idempotent
capabilities: [test.big_once]
input_schema: {type: object}
output_schema: {type: object, required: [blob, size], properties: {blob: {type: string}, size: {type: integer}}}
entrypoint: {type: command, command: [./run.sh]}
idempotent: false
`
	if err := os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	run := "#!/bin/sh\nexec \"$(dirname \"$0\")/../big/run.sh\"\n"
	if err := os.WriteFile(filepath.Join(tool, "run.sh"), []byte(run), 0o755); err != nil {
		t.Fatal(err)
	}
	var dirs [2]string
	for i := range dirs {
		d, err := os.MkdirTemp(h.tmp, fmt.Sprintf("store-%c-", 'a'+i))
		if err != nil {
			t.Fatal(err)
		}
		if err := copyTree(h.project, d); err != nil {
			t.Fatal(err)
		}
		dirs[i] = d
	}
	store := filepath.Join(h.tmp, "shared-artifacts")
	env := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=" + queue, "CAPFLOW_TEMPORAL_HOST_WAIT=3s", "CAPFLOW_ARTIFACTS_URL=file://" + store}
	startAt := func(dir string) {
		t.Helper()
		if err := h.startWorkerAt(dir, env...); err != nil {
			t.Fatal(err)
		}
	}
	plan := h.writePlan(t, "store-move", `name: store-move
defaults: {heartbeat: 2s}
steps:
  - {id: make, capability: test.big_once}
  - {id: wait, capability: test.slow, needs: [make], with: {seconds: 8}}
  - id: use
    capability: json.query
    needs: [wait]
    with: {query: ".blob | length", input: "${steps.make.data}"}
outputs:
  length: ${steps.use.data.result}
`)
	startAt(dirs[0])
	h.mu.Lock()
	victim := h.workers[len(h.workers)-1]
	h.mu.Unlock()
	code, e, stderr := h.capflow(t, "run", plan, "--task-queue", queue, "--detach")
	var s struct {
		WorkflowID string `json:"workflow_id"`
	}
	data(t, e, &s)
	if code != 0 {
		t.Fatalf("start: exit %d %s\n%s", code, e.Message, stderr)
	}
	waitStepRunning(t, s.WorkflowID, "wait")
	startAt(dirs[1])
	defer func() {
		h.mu.Lock()
		w := h.workers[len(h.workers)-1]
		h.mu.Unlock()
		h.kill(w)
	}()
	h.kill(victim)
	var res runResult
	code, e, stderr = h.capflow(t, "status", s.WorkflowID, "--follow", "--task-queue", queue)
	data(t, e, &res)
	if code != 0 || res.Status != "passed" || fmt.Sprint(res.Outputs["length"]) != "300000" {
		t.Fatalf("exit %d %s (%s), outputs %v\n%s", code, res.Status, res.Message, res.Outputs, stderr)
	}
	if m := res.step(t, "make"); m.Attempts != 1 {
		t.Fatalf("the producer ran %d times", m.Attempts)
	}
	if _, err := os.Stat(store); err != nil {
		t.Fatalf("no shared store: %v", err)
	}
}
