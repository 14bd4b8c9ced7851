package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/capflow/capflow/internal/wfapi"
)

// TestEagerStepsRunOnTheRunsHost: two hosts with temporal.eager_steps on
// one queue. Each step's first attempt goes to the shared queue (this dev
// server does not start activities eagerly, so either worker's poll may
// take it); a worker that is not the run's host refuses it before anything
// runs and the step runs on the host's queue. Every run passes with the
// files its steps made on its host (a step run on the other host would
// not find them), no step runs twice, and the refusals happened.
func TestEagerStepsRunOnTheRunsHost(t *testing.T) {
	const queue = "capflow-eager"
	env := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=" + queue, "CAPFLOW_TEMPORAL_EAGER_STEPS=true"}
	for _, dir := range hostCopies(t, "eager", 2) {
		w := startHost(t, dir, env)
		defer h.kill(w)
	}
	file := h.writePlan(t, "eager", `name: eager
inputs:
  id: {type: string}
steps:
  - id: render
    capability: test.render
    with: {template: "note {{.id}}", values: {id: "${inputs.id}"}, output_path: ".capflow/out/eager/${inputs.id}/note.txt", overwrite: true}
  - id: pack
    capability: archive.create
    needs: [render]
    with: {source: ".capflow/out/eager/${inputs.id}/note.txt", output: ".capflow/out/eager/${inputs.id}/note.tar.gz", overwrite: true}
  - id: unpack
    capability: archive.extract
    needs: [pack]
    with: {archive: "${steps.pack.data.path}", dest: ".capflow/out/eager/${inputs.id}/x", overwrite: true}
  - id: read
    capability: file.read
    with: {path: "${steps.unpack.data.dest}/note.txt"}
outputs:
  note: ${steps.read.data.content}
`)
	var ids []string
	for i := range 6 {
		code, e, stderr := h.capflow(t, "run", file, "--task-queue", queue, "--detach", "--input", fmt.Sprintf("id=e%d", i))
		var s struct {
			WorkflowID string `json:"workflow_id"`
		}
		data(t, e, &s)
		if code != 0 {
			t.Fatalf("start %d: exit %d %s\n%s", i, code, e.Message, stderr)
		}
		ids = append(ids, s.WorkflowID)
	}
	refused := 0
	for i, id := range ids {
		var res runResult
		code, e, stderr := h.capflow(t, "status", id, "--follow", "--task-queue", queue)
		data(t, e, &res)
		if code != 0 || res.Status != "passed" || res.Outputs["note"] != fmt.Sprintf("note e%d", i) {
			t.Fatalf("run %d: exit %d %s (%s), note %v\n%s", i, code, res.Status, res.Message, res.Outputs["note"], stderr)
		}
		for _, step := range []string{"render", "pack", "unpack"} { // read is a local step
			if s := res.step(t, step); s.Execution != "activity" || s.Attempts != 1 {
				t.Fatalf("run %d, step %s: execution %q attempts %d", i, s.ID, s.Execution, s.Attempts)
			}
		}
		refused += eagerAttempts(t, id, queue)
	}
	if refused == 0 {
		t.Fatal("no first attempt was refused by the other host: the refusal was not exercised")
	}
	recordChange(t, "eager-steps", "eager-steps", ids...)
}

// eagerAttempts checks a run's RunTool activities: each step's first on
// the shared queue, and after each refused one (CAPFLOW_WRONG_HOST) one on
// the run's host queue. It returns how many were refused.
func eagerAttempts(t *testing.T, id, queue string) int {
	t.Helper()
	it := h.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	queues := map[int64]string{} // scheduled event -> its queue
	var seq []string             // RunTool activities' queues in order, "!" after a refused one
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == wfapi.RunToolActivity {
			queues[ev.GetEventId()] = a.GetTaskQueue().GetName()
			seq = append(seq, a.GetTaskQueue().GetName())
		}
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil && queues[a.GetScheduledEventId()] != "" &&
			a.GetFailure().GetApplicationFailureInfo().GetType() == wfapi.ErrWrongHost {
			seq = append(seq, "!")
		}
	}
	refused, first := 0, 0
	for k, q := range seq {
		switch {
		case q == "!":
			refused++
			if k+1 >= len(seq) || !strings.HasPrefix(seq[k+1], queue+"@") {
				t.Fatalf("%s: a refused attempt was not followed by one on the host's queue: %v", id, seq)
			}
		case q == queue:
			first++
		}
	}
	if first != 3 {
		t.Fatalf("%s: %d first attempts on the shared queue, want one a regular step (3): %v", id, first, seq)
	}
	return refused
}
