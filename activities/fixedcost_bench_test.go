package activities

import (
	"context"
	"fmt"
	"testing"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
)

// BenchmarkRunFixedCost is what every run costs its worker besides its
// steps (docs/performance.md): Resolve of a 3-step plan of a builtin
// (registry, checks, policy, the run folder) and Finalize of its passed
// result (report.json, report.md), called directly, a run folder each.
func BenchmarkRunFixedCost(b *testing.B) {
	a, _ := newActivities(b)
	plan := map[string]any{"name": "fixed", "steps": []any{
		map[string]any{"id": "s0", "capability": "text.render", "with": map[string]any{"template": "ok"}},
		map[string]any{"id": "s1", "capability": "text.render", "with": map[string]any{"template": "ok"}, "needs": []any{"s0"}},
		map[string]any{"id": "s2", "capability": "text.render", "with": map[string]any{"template": "ok"}, "needs": []any{"s1"}},
	}}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("fixed-%d", i)
		rr, err := a.Resolve(ctx, wfapi.ResolveInput{Plan: plan, WorkflowID: id, CarrySteps: true})
		if err != nil || rr.Status != "ready" {
			b.Fatalf("%v %+v", err, rr)
		}
		res := wfapi.Result{Status: wfapi.StatusPassed, Plan: rr.Plan, WorkflowID: id, RunID: "r"}
		for _, s := range rr.Steps {
			env := envelope.NewBuilder(s.Tool).Succeed("ok", map[string]any{"text": "ok", "bytes": 2})
			res.Steps = append(res.Steps, wfapi.StepResult{ID: s.ID, Capability: s.Capability, Status: "succeeded", Tool: s.Tool,
				Version: s.Version, Attempts: 1, Execution: "inline", Envelope: &env})
		}
		if _, err := a.Finalize(ctx, wfapi.FinalizeInput{Result: res, Resolved: rr}); err != nil {
			b.Fatal(err)
		}
	}
}
