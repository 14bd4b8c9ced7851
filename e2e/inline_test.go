package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
)

// TestInlineSteps: pure builtins (json.query, text.render) run in batches,
// one local activity each, reading each other's data (a chain of them in
// Resolve's local activity, evaluated ahead); one that writes a file and
// one that fails take the local activity, as before; for_each items too;
// a quick command inline, a slow one (past the budget) as a local activity.
// An inline step writes no step folder. The history is recorded for the
// replay test.
func TestInlineSteps(t *testing.T) {
	out := filepath.Join(h.project, "out", "inline.txt")
	_ = os.Remove(out)
	p := h.writePlan(t, "inline-steps", `name: inline-steps
outputs: {greeting: "${steps.greet.data.text}", total: "${steps.total.data.count}"}
steps:
  - {id: double, capability: json.query, with: {query: "[.[] * 2]", input: [1, 2, 3]}}
  - {id: total, capability: json.query, needs: [double], with: {query: ".[0] | add", input: "${steps.double.data.results}"}}
  - {id: greet, capability: text.render, needs: [total], with: {template: "total {{index .t 0}}", values: {t: "${steps.total.data.results}"}}}
  - {id: file, capability: text.render, needs: [greet], with: {template: "{{.g}}", values: {g: "${steps.greet.data.text}"}, output_path: out/inline.txt}}
  - {id: bad, capability: json.query, needs: [greet], on_failure: skip, with: {query: "error(\"boom\")", input: 1}}
  - id: each
    capability: text.render
    needs: [greet]
    for_each: [1, 2, 3]
    with: {template: "item {{.n}}", values: {n: "${item}"}}
  - {id: cmd, capability: test.quick_inline, needs: [greet], with: {mode: quick}}
  - {id: slowcmd, capability: test.quick_inline, needs: [greet], with: {mode: slow}}
`)
	code, r := h.run(t, p)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	want := map[string]string{"double": "inline", "total": "inline", "greet": "inline", "file": "local", "bad": "local",
		"cmd": "inline", "slowcmd": "local"}
	for id, path := range want {
		if s := r.step(t, id); s.Execution != path {
			t.Errorf("step %s ran %q, want %q", id, s.Execution, path)
		}
	}
	if r.Outputs["greeting"] != "total 12" || r.Outputs["total"] != float64(1) {
		t.Fatalf("outputs %v", r.Outputs)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "total 12" {
		t.Fatalf("%s: %q %v", out, b, err)
	}
	if s := r.step(t, "bad"); s.Status != "skipped" || s.Envelope == nil || s.Envelope.Error == nil || s.Envelope.Error.Code != "INVALID_INPUT" {
		t.Fatalf("bad: %s %+v", s.Status, s.Envelope)
	}
	if each := r.step(t, "each"); each.ItemCounts == nil || each.ItemCounts.Succeeded != 3 {
		t.Fatalf("each: %+v", each.ItemCounts)
	}
	// No step folder for an inline step: nothing was written for it.
	for _, id := range []string{"double", "total", "greet"} {
		if _, err := os.Stat(filepath.Join(h.project, ".capflow/runs", r.WorkflowID, "steps", id)); !os.IsNotExist(err) {
			t.Errorf("step %s has a folder: %v", id, err)
		}
	}
	// A command runs in its step folder, confined as any other; the slow
	// one was killed at the inline budget and ran again as a local
	// activity (it is idempotent).
	for id, starts := range map[string]string{"cmd": "started\n", "slowcmd": "started\nstarted\n"} {
		b, err := os.ReadFile(filepath.Join(h.project, ".capflow/runs", r.WorkflowID, "steps", id, "started"))
		if err != nil || string(b) != starts {
			t.Errorf("step %s started %q (%v), want %q", id, b, err, starts)
		}
	}
	// No tool ran in the workflow task: no SideEffect marker; the inline
	// steps ran in batches, each one local activity (RunInline).
	markers, events := map[string]int{}, map[enumspb.EventType]int{}
	it := h.client.GetWorkflowHistory(context.Background(), r.WorkflowID, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events[ev.GetEventType()]++
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil {
			name := m.GetMarkerName()
			if name == "LocalActivity" {
				var d struct{ ActivityType string }
				_ = converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["data"], &d)
				name = d.ActivityType
			}
			markers[name]++
		}
	}
	// Resolve evaluated double, total and greet ahead (the chain the run
	// starts with); what follows greet is the one batch.
	if markers["SideEffect"] != 0 || markers["RunInline"] != 1 || markers["Resolve"] != 1 {
		t.Fatalf("markers %v: want no SideEffect, Resolve evaluating double, total and greet ahead, one RunInline batch (the steps after greet)", markers)
	}
	// A new run asks one workflow change, baseline 4, whatever it runs
	// (a Version marker and a search-attribute upsert each).
	if markers["Version"] != 1 {
		t.Fatalf("markers %v: a new run recorded %d Version markers, want 1 (baseline 4)", markers, markers["Version"])
	}
	// Every step ran in local activities, within the first workflow task:
	// no deadline timer, and of the run's status only its last (beside
	// the baseline's TemporalChangeVersion).
	if events[enumspb.EVENT_TYPE_TIMER_STARTED] != 0 || events[enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES] != 2 || events[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED] != 1 {
		t.Fatalf("events %v: want one workflow task, no timer, two upserts", events)
	}
	validResult(t, r.WorkflowID)
	recordHistory(t, r.WorkflowID, "inline-steps")
	recordChange(t, "baseline-4", "baseline-4", r.WorkflowID)
}
