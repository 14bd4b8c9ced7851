package wfapi

import "testing"

// InlineKey is frozen: a replay recomputes the key of every step that took
// an outcome evaluated ahead, so the key of a given input never changes
// (a new key is a workflow change). It reads the step's call, inputs and
// dependencies, not the run's names.
func TestInlineKey(t *testing.T) {
	in := func() RunToolInput {
		return RunToolInput{WorkflowID: "w", RunDir: "/runs/w",
			Step:   StepCall{ID: "b", Capability: "text.render", Tool: "text-render", Version: "1.0.0", Digest: "sha256:x", Idempotent: true, With: map[string]any{"template": "${steps.a.data.n}"}},
			Inputs: map[string]any{"who": "x"},
			Deps:   map[string]StepOutcome{"a": Succeeded(map[string]any{"n": float64(1)}, "", "", nil, true)}}
	}
	const frozen = "bd203c5ee7bb9385033fc84b7ee45bfa"
	base := InlineKey(in())
	if base != frozen {
		t.Errorf("InlineKey of the fixed input is %s, was %s: a changed key is a workflow change", base, frozen)
	}
	for _, tc := range []struct {
		name string
		edit func(*RunToolInput)
		same bool
	}{
		{"the run's ID, folder, host, lineage and retry", func(r *RunToolInput) {
			r.WorkflowID, r.RunDir, r.Host, r.Lineage, r.Retry, r.AttemptsBefore = "v", "/runs/v", "q@h", "l", 1, 2
		}, true},
		{"the capability named (the tool decides)", func(r *RunToolInput) { r.Step.Capability = "other" }, true},
		{"a dependency's data", func(r *RunToolInput) { r.Deps["a"] = Succeeded(map[string]any{"n": float64(2)}, "", "", nil, true) }, false},
		{"a dependency's status", func(r *RunToolInput) { r.Deps["a"] = StepOutcome{Status: StepPending} }, false},
		{"an input", func(r *RunToolInput) { r.Inputs["who"] = "y" }, false},
		{"the with", func(r *RunToolInput) { r.Step.With = map[string]any{"template": "x"} }, false},
		{"the tool's digest", func(r *RunToolInput) { r.Step.Digest = "sha256:y" }, false},
		{"a spilled input", func(r *RunToolInput) { r.Spilled = &Blob{} }, false},
	} {
		r := in()
		tc.edit(&r)
		if got := InlineKey(r); (got == base) != tc.same {
			t.Errorf("%s: key %s against %s, want the same: %v", tc.name, got, base, tc.same)
		}
	}
}
