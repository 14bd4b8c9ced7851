package client

import "testing"

// A running step's latest feedback comes from its activity's heartbeat,
// whatever the activity ID adds to "step-<id>"; an ended step, or
// capflow's own activity, gets none.
func TestLiveFeedback(t *testing.T) {
	wait := &Feedback{Phase: "limits", Message: "waiting for a slot (tool x: concurrency 2)"}
	res := &Result{Steps: []StepResult{{ID: "a", Status: StepRunning}, {ID: "b", Status: StepRunning}, {ID: "c", Status: StepSucceeded}}}
	res.Live(&RunInfo{Pending: []PendingActivity{
		{ActivityID: "step-a-retry-2", Heartbeat: &Heartbeat{Latest: wait}},
		{ActivityID: "step-c", Heartbeat: &Heartbeat{Latest: wait}},
		{ActivityID: "finalize", Heartbeat: &Heartbeat{Latest: wait}},
	}})
	if res.Steps[0].Latest != wait || res.Steps[1].Latest != nil || res.Steps[2].Latest != nil {
		t.Fatalf("latest: a %v, b %v, c %v", res.Steps[0].Latest, res.Steps[1].Latest, res.Steps[2].Latest)
	}
	for id, want := range map[string]string{"step-x": "x", "step-x-after-local": "x", "step-x-host-3": "x", "step-x-rerun-1": "x", "step-my-step": "my-step", "step-x[3]": "x", "step-x-retry-2-host-1": "x", "step-x[12]-after-local": "x", "step-x@host": "x", "step-x-retry-1@host": "x", "step-x-on-host": "x-on-host"} {
		if got, ok := StepOfActivity(id); !ok || got != want {
			t.Errorf("%s: %q %v, want %q", id, got, ok, want)
		}
	}
	for id, want := range map[string]string{"step-x": "x", "step-x@host": "x", "step-x[3]": "x[3]", "step-x[12]-after-local": "x[12]", "step-x-retry-1-host-2": "x"} {
		if got, ok := LabelOfActivity(id); !ok || got != want {
			t.Errorf("label of %s: %q %v, want %q", id, got, ok, want)
		}
	}
	if _, ok := StepOfActivity("resolve"); ok {
		t.Error("capflow's own activity taken for a step's")
	}
}
