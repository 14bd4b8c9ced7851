package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With a shared artifact store, a run whose host dies (and its disk with
// it) goes on on another host with its own copy of the project, reading
// what finished steps stored from the store: the producer that is not
// idempotent, which could never run again, ran once; the idempotent one
// did not run again either (its token is the one the consumer reads from
// its file, fetched from the store). Without the store the consumer finds
// the producer's data on the lost host, and the run fails.
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
	stampTool(t, h.project)
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
  - {id: stamp, capability: test.stamp}
  - {id: wait, capability: test.slow, needs: [make, stamp], with: {seconds: 8}}
  - {id: check, capability: test.stamp, needs: [wait], with: {read: "${steps.stamp.data.file}"}}
  - id: use
    capability: json.query
    needs: [wait]
    with: {query: ".blob | length", input: "${steps.make.data}"}
outputs:
  length: ${steps.use.data.result}
  read: ${steps.check.data.read}
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
	// The token the producer wrote, as its file on the first host has it.
	files, _ := filepath.Glob(filepath.Join(dirs[0], ".capflow", "runs", "*", "steps", "stamp", "token.txt"))
	if len(files) != 1 {
		t.Fatalf("the producer's file on the first host: %v", files)
	}
	raw, _ := os.ReadFile(files[0])
	was := strings.TrimSpace(string(raw))
	startAt(dirs[1])
	defer func() {
		h.mu.Lock()
		w := h.workers[len(h.workers)-1]
		h.mu.Unlock()
		h.kill(w)
	}()
	h.kill(victim)
	// The lost host's disk goes with it.
	if err := os.RemoveAll(filepath.Join(dirs[0], ".capflow", "runs")); err != nil {
		t.Fatal(err)
	}
	var res runResult
	code, e, stderr = h.capflow(t, "status", s.WorkflowID, "--follow", "--task-queue", queue)
	data(t, e, &res)
	if code != 0 || res.Status != "passed" || fmt.Sprint(res.Outputs["length"]) != "300000" {
		t.Fatalf("exit %d %s (%s), outputs %v\n%s", code, res.Status, res.Message, res.Outputs, stderr)
	}
	if m := res.step(t, "make"); m.Attempts != 1 {
		t.Fatalf("the producer ran %d times", m.Attempts)
	}
	st := res.step(t, "stamp")
	tok, _ := st.Envelope.Data.(map[string]any)["token"].(string)
	if st.Attempts != 1 || tok == "" || tok != was || res.Outputs["read"] != tok {
		t.Fatalf("the idempotent producer: attempts %d, token %q (%q before the move); the consumer read %q from its file", st.Attempts, tok, was, res.Outputs["read"])
	}
	if len(st.Artifacts) != 1 || st.Artifacts[0].Pointer != "/file" {
		t.Fatalf("the producer's file is not named as an artifact: %+v", st.Artifacts)
	}
	if _, err := os.Stat(store); err != nil {
		t.Fatalf("no shared store: %v", err)
	}
}
