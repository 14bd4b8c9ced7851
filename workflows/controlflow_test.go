package workflows

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

func itemName(s *plan.Step) string {
	if s.IsForEach() {
		return s.ItemName()
	}
	return ""
}

// data returns a behaviour whose step succeeds with the given data.
func data(v map[string]any) behaviour {
	return func(ctx context.Context, attempt int32) (*wfapi.RunToolResult, error) {
		return &wfapi.RunToolResult{Attempt: attempt, Envelope: envelope.Envelope{ToolID: "t", Success: true, Message: "ok",
			Timestamp: "2026-11-21T00:00:00Z", Data: v}}, nil
	}
}

func stepResult(res *wfapi.Result, id string) wfapi.StepResult {
	for _, s := range res.Steps {
		if s.ID == id {
			return s
		}
	}
	return wfapi.StepResult{}
}

func TestForEachLiteralList(t *testing.T) {
	src := "name: fe\nmax_parallel: 8\nsteps:\n  - {id: each, capability: x.a, for_each: [a, b, c, d, e], max_parallel: 2, with: {v: '${item}', i: '${index}'}}\n  - {id: after, capability: x.b, needs: [each]}\n"
	res, f := execute(t, src, nil)
	each := stepResult(res, "each")
	if res.Status != wfapi.StatusPassed || each.Status != wfapi.StepSucceeded || f.peak > 2 {
		t.Fatalf("%s [%s] peak %d", res.Status, states(res), f.peak)
	}
	if f.callsOf("each[0]") != 1 || f.callsOf("each[4]") != 1 || f.callsOf("after") != 1 || f.callsOf("decide-each") != 0 {
		t.Fatalf("calls %v", f.calls)
	}
	d := each.Envelope.Data.(map[string]any)
	if d["count"] != float64(5) || d["succeeded"] != float64(5) || d["failed"] != float64(0) || len(d["items"].([]any)) != 5 {
		t.Fatalf("aggregate %v", d)
	}
	if in := f.inputs["each[3]"]; in.Step.Item == nil || in.Step.Item.Index != 3 || in.Step.Item.ItemName != "item" {
		t.Fatalf("item call %+v", in.Step)
	}
	if each.ItemCounts == nil || each.ItemCounts.Succeeded != 5 || len(each.Items) != 5 {
		t.Fatalf("item results %+v", each)
	}
}

func TestForEachFromAStepTolerateAndFailFast(t *testing.T) {
	src := "name: fe\nsteps:\n  - {id: find, capability: x.a}\n  - {id: each, capability: x.b, for_each: '${steps.find.data.files}', as: file, %s with: {p: '${file}'}}\n  - {id: after, capability: x.c, needs: [each]}\n"
	files := data(map[string]any{"files": []any{"a", "b", "c", "d"}})
	res, f := execute(t, fmtS(src, "tolerate: {failures: 1},"), map[string]behaviour{"find": files, "each[1]": fail(caperr.TestFailure)})
	each := stepResult(res, "each")
	d := each.Envelope.Data.(map[string]any)
	if res.Status != wfapi.StatusPassed || each.Status != wfapi.StepSucceeded || d["failed"] != float64(1) || d["items"].([]any)[1] != nil || f.callsOf("decide-each") != 1 {
		t.Fatalf("tolerated: %s [%s] %v calls %v", res.Status, states(res), d, f.calls)
	}
	res, _ = execute(t, fmtS(src, ""), map[string]behaviour{"find": files, "each[1]": fail(caperr.TestFailure)})
	each = stepResult(res, "each")
	if res.Status != wfapi.StatusFailed || each.Status != wfapi.StepFailed || caperr.Code(each.Envelope.Error.Code) != caperr.TestFailure || !strings.Contains(each.Envelope.Message, "tolerate 0") {
		t.Fatalf("not tolerated: %s [%s] %+v", res.Status, states(res), each.Envelope)
	}
	if stepResult(res, "after").Status != wfapi.StepSkipped {
		t.Fatalf("after: %s", states(res))
	}
	// An empty list succeeds with count 0.
	res, _ = execute(t, fmtS(src, ""), map[string]behaviour{"find": data(map[string]any{"files": []any{}})})
	if each = stepResult(res, "each"); res.Status != wfapi.StatusPassed || each.Envelope.Data.(map[string]any)["count"] != float64(0) {
		t.Fatalf("empty: %s [%s]", res.Status, states(res))
	}
}

func TestWhen(t *testing.T) {
	src := "name: w\ninputs: {notify: {type: boolean, default: false}}\nsteps:\n  - {id: count, capability: x.a}\n  - {id: big, capability: x.b, when: 'steps.count.data.n > 3'}\n  - {id: notify, capability: x.c, when: 'inputs.notify'}\n  - {id: last, capability: x.d, needs: [big, notify]}\n"
	res, f := execute(t, src, map[string]behaviour{"count": data(map[string]any{"n": float64(5)})})
	if states(res) != "count=succeeded big=succeeded notify=skipped last=succeeded" || stepResult(res, "notify").Reason != "when: false" || res.Status != wfapi.StatusPassed {
		t.Fatalf("%s [%s]", res.Status, states(res))
	}
	if f.callsOf("notify") != 0 || f.callsOf("big") != 1 {
		t.Fatalf("calls %v", f.calls)
	}
	// Both conditions false: the join over only skipped steps is satisfied.
	res, _ = execute(t, src, map[string]behaviour{"count": data(map[string]any{"n": float64(1)})})
	if states(res) != "count=succeeded big=skipped notify=skipped last=succeeded" || res.Status != wfapi.StatusPassed {
		t.Fatalf("%s [%s]", res.Status, states(res))
	}
	// A condition over the item filters items.
	src = "name: w\nsteps:\n  - {id: each, capability: x.a, for_each: [a.webm, b.txt, c.webm], when: 'item.endsWith(\".webm\")'}\n"
	res, f = execute(t, src, nil)
	each := stepResult(res, "each")
	if res.Status != wfapi.StatusPassed || f.callsOf("each[1]") != 0 || f.callsOf("each[0]") != 1 || each.ItemCounts.Skipped != 1 || each.Items[1].Reason != "when: false" {
		t.Fatalf("%s %+v calls %v", res.Status, each, f.calls)
	}
}

// Large for_each steps run their items in batches of child workflows, so
// no history grows with the number of items.
func TestForEachInBatches(t *testing.T) {
	saved := ItemBatch
	ItemBatch = 3
	defer func() { ItemBatch = saved }()
	src := "name: b\nmax_parallel: 4\nsteps:\n  - {id: each, capability: x.a, for_each: [a, b, c, d, e, f, g, h], %s with: {v: '${item}'}}\n  - {id: after, capability: x.b, needs: [each]}\n"
	res, f := execute(t, fmtS(src, "tolerate: {failures: 1},"), map[string]behaviour{"each[4]": fail(caperr.TestFailure)})
	each := stepResult(res, "each")
	d := each.Envelope.Data.(map[string]any)
	if res.Status != wfapi.StatusPassed || d["count"] != float64(8) || d["succeeded"] != float64(7) || d["failed"] != float64(1) || f.callsOf("after") != 1 {
		t.Fatalf("tolerated: %s [%s] %v", res.Status, states(res), d)
	}
	for i := 0; i < 8; i++ {
		if n := f.callsOf(wfapi.ItemLabel("each", i)); n != 1 {
			t.Fatalf("item %d ran %d times", i, n)
		}
	}
	if v := f.inputs["each[7]"].Step.Item; v == nil || !v.HasValue || v.Value != "h" {
		t.Fatalf("a batch item carries its value: %+v", v)
	}
	// Not tolerated under fail_fast: the step fails, later batches never start.
	res, f = execute(t, fmtS(src, ""), map[string]behaviour{"each[1]": fail(caperr.TestFailure)})
	each = stepResult(res, "each")
	if res.Status != wfapi.StatusFailed || each.Status != wfapi.StepFailed || f.callsOf("each[6]") != 0 || each.ItemCounts.Failed != 1 {
		t.Fatalf("fail_fast: %s [%s] %+v", res.Status, states(res), each.ItemCounts)
	}
}

// Found in review: a step's own cancelled items are cancelled, not failed;
// on_failure: skip applies to for_each steps; a when: false is never a
// failure, even for a critical step or a dependent of a failed step.
func TestControlFlowReviewFindings(t *testing.T) {
	src := "name: r\nsteps:\n  - {id: each, capability: x.a, for_each: [a, b, c, d], max_parallel: 4, %s}\n  - {id: plain, capability: x.b}\n"
	res, _ := execute(t, fmtS(src, "with: {}"), map[string]behaviour{"each": block, "each[2]": fail(caperr.TestFailure)})
	each := stepResult(res, "each")
	if each.ItemCounts.Failed != 1 || caperr.Code(each.Envelope.Error.Code) != caperr.TestFailure {
		t.Fatalf("own cancelled items: %+v %+v", each.ItemCounts, each.Envelope.Error)
	}
	res, _ = execute(t, fmtS(src, "on_failure: skip"), map[string]behaviour{"each[2]": fail(caperr.TestFailure)})
	if each = stepResult(res, "each"); each.Status != wfapi.StepSkipped || res.Status != wfapi.StatusPassed {
		t.Fatalf("on_failure: skip: %s [%s]", res.Status, states(res))
	}
	absorbed := "name: w\ninputs: {go: {type: boolean, default: false}}\nfailure_policy: continue_all\nsteps:\n  - {id: a, capability: x.a}\n  - {id: b, capability: x.b}\n  - {id: d, capability: x.d, needs: [a, b], join: {policy: any}, when: inputs.go}\n"
	res, _ = execute(t, absorbed, map[string]behaviour{"a": fail(caperr.TestFailure)})
	if res.Status != wfapi.StatusPassed || stepResult(res, "d").Reason != "when: false" {
		t.Fatalf("a failure before a when: false any join: %s [%s] %s", res.Status, states(res), res.Message)
	}
	critical := "name: c\ninputs: {go: {type: boolean, default: false}}\nfailure_policy: critical_path\nsteps:\n  - {id: must, capability: x.a, critical: true, when: inputs.go}\n  - {id: other, capability: x.b}\n"
	if res, _ = execute(t, critical, nil); res.Status != wfapi.StatusPassed {
		t.Fatalf("a critical when: false: %s [%s] %s", res.Status, states(res), res.Message)
	}
}

func TestWhenOverASkippedStepSaysHowToGuard(t *testing.T) {
	src := "name: g\ninputs: {go: {type: boolean, default: false}}\nsteps:\n  - {id: a, capability: x.a, when: inputs.go}\n  - {id: b, capability: x.b, when: 'steps.a.data.n > 1'}\n"
	res, _ := execute(t, src, nil)
	b := stepResult(res, "b")
	if b.Status != wfapi.StepFailed || !strings.Contains(b.Envelope.Message, "guard with steps.a.success") {
		t.Fatalf("%s: %+v", b.Status, b.Envelope)
	}
}

// The report's plan is the one the run was given: Resolve does not record
// it a second time, the workflow hands it to Finalize. A plan file's value
// is never recorded.
func TestFinalizeGetsThePlanGiven(t *testing.T) {
	given := map[string]any{"name": "x", "steps": []any{map[string]any{"id": "a", "capability": "x.a"}}}
	for _, c := range []struct {
		name string
		in   wfapi.Input
		want any
	}{
		{"inline", wfapi.Input{Plan: given}, given},
		{"file", wfapi.Input{PlanFile: "plans/x.yaml"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakes{resolved: resolvedFrom(t, "name: x\nsteps:\n  - {id: a, capability: x.a}\n"), calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}}
			env := newEnv(t, f)
			env.ExecuteWorkflow(wfapi.WorkflowType, c.in)
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow did not complete: %v", env.GetWorkflowError())
			}
			if f.finalized == nil || f.finalized.Resolved == nil {
				t.Fatal("Finalize got no resolution")
			}
			if got := f.finalized.Resolved.PlanValue; !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Finalize got plan %v, want %v", got, c.want)
			}
		})
	}
}

// A for_each step's aggregate keeps its items' data while it fits in
// maxAggregate; past it none (the items' own results have it), and the
// scheduler keeps no item's data from then on.
func TestForEachAggregateBound(t *testing.T) {
	big := map[string]any{"text": strings.Repeat("x", 10<<10)}
	for _, c := range []struct {
		items   int
		omitted bool
	}{{5, false}, {40, true}} {
		list := strings.TrimSuffix(strings.Repeat("a, ", c.items), ", ")
		src := "name: fe\nmax_parallel: 8\nsteps:\n  - {id: each, capability: x.a, for_each: [" + list + "], with: {v: '${item}'}}\n"
		res, _ := execute(t, src, map[string]behaviour{"each": data(big)})
		d := stepResult(res, "each").Envelope.Data.(map[string]any)
		items, _ := d["items"].([]any)
		why, _ := d["items_omitted"].(string)
		if d["succeeded"] != float64(c.items) || (len(items) == 0) != c.omitted || (why != "") != c.omitted {
			t.Fatalf("%d items of 10 KB: %d items in the aggregate, omitted %q", c.items, len(items), why)
		}
		if c.omitted && !strings.Contains(why, "over 262144 bytes") {
			t.Fatalf("omitted %q", why)
		}
	}
	fe := &forEach{items: make([]*itemState, 40)}
	for i := range fe.items {
		fe.items[i] = &itemState{status: wfapi.StepSucceeded}
		fe.keep(fe.items[i], big)
	}
	for i, it := range fe.items {
		if it.data != nil {
			t.Fatalf("item %d's data kept past the aggregate's bound", i)
		}
	}
}
