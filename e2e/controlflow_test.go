package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/capflow/capflow/internal/wfapi"
)

// activitySummaries lists the summaries the Web UI shows for a run's
// activities.
func activitySummaries(t *testing.T, id string) []string {
	t.Helper()
	it := h.client.GetWorkflowHistory(context.Background(), id, "", false, 0)
	var out []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetActivityTaskScheduledEventAttributes() == nil || ev.GetUserMetadata().GetSummary() == nil {
			continue
		}
		var s string
		if err := converter.GetDefaultDataConverter().FromPayload(ev.GetUserMetadata().GetSummary(), &s); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// The for_each example on the real server: items named sum[i] in the
// result, the report and the Web UI's activity summaries; outputs returned.
func TestForEachEndToEnd(t *testing.T) {
	code, r := h.run(t, filepath.Join(h.project, "plans/examples/for-each-checksums.yaml"))
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	sum := r.step(t, "sum")
	if sum.ItemCounts == nil || sum.ItemCounts.Count != 3 || sum.ItemCounts.Succeeded != 3 || len(sum.Items) != 3 {
		t.Fatalf("sum: %+v", sum)
	}
	if r.Outputs["files"] != float64(3) || len(r.Outputs["checksums"].([]any)) != 3 || !strings.HasSuffix(r.Outputs["report"].(string), "summary.txt") {
		t.Fatalf("outputs: %v", r.Outputs)
	}
	md, _ := os.ReadFile(r.Report.Markdown)
	if !strings.Contains(string(md), "sum[2]") {
		t.Fatalf("the report does not name the items:\n%s", md)
	}
	if sums := strings.Join(activitySummaries(t, r.WorkflowID), "\n"); !strings.Contains(sums, "sum[1] · file.checksum → file-checksum@1.0.0") {
		t.Fatalf("the Web UI summaries do not name the items:\n%s", sums)
	}
	recordHistory(t, r.WorkflowID, "for-each")
}

// Conditions on the real server: a false one skips its step with
// "when: false", and the join after it still runs.
func TestConditionsEndToEnd(t *testing.T) {
	code, r := h.run(t, filepath.Join(h.project, "plans/examples/conditions.yaml"), "--input", "min_files=10")
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	for id, want := range map[string]wfapi.StepState{"find": wfapi.StepSucceeded, "archive": wfapi.StepSkipped, "notify": wfapi.StepSkipped, "done": wfapi.StepSucceeded} {
		if s := r.step(t, id); s.Status != want || (want == wfapi.StepSkipped && s.Reason != "when: false") {
			t.Errorf("%s: %s (%s), want %s", id, s.Status, s.Reason, want)
		}
	}
	recordHistory(t, r.WorkflowID, "conditions")
	// A condition that does not type-check is refused before the run.
	p := h.writePlan(t, "bad-when", "name: bad-when\nsteps:\n  - {id: find, capability: file.list, with: {dir: .}}\n  - {id: x, capability: file.list, when: 'steps.find.data.files > 3', with: {dir: .}}\n")
	code, env, _ := h.capflow(t, "plan", "check", p)
	if code != 2 || !strings.Contains(env.Message, "steps.find.data.files > 3") {
		t.Fatalf("a list compared with an int: exit %d %s", code, env.Message)
	}
}

// Sub-plans on the real server: child workflows with their own reports,
// linked from the parent's; the child's outputs are the step's data; the
// child starts listed as running.
func TestSubPlansEndToEnd(t *testing.T) {
	code, r := h.run(t, filepath.Join(h.project, "plans/examples/sub-plans.yaml"))
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	first := r.step(t, "first")
	if first.Child == nil || first.Child.WorkflowID != r.WorkflowID+".first" || first.Child.Status != wfapi.StatusPassed {
		t.Fatalf("first: %+v", first)
	}
	if b, err := os.ReadFile(first.Child.Report.Markdown); err != nil || !strings.Contains(string(b), "checksum-one") {
		t.Fatalf("the child's report: %v", err)
	}
	a, _ := r.Outputs["a"].(string)
	if len(a) != 64 || r.Outputs["b"] == a {
		t.Fatalf("outputs: %v", r.Outputs)
	}
	md, _ := os.ReadFile(r.Report.Markdown)
	if !strings.Contains(string(md), first.Child.WorkflowID) {
		t.Fatalf("the parent's report does not link the child:\n%s", md)
	}
	// The child started listed as running, as package client starts runs.
	it := h.client.GetWorkflowHistory(context.Background(), first.Child.WorkflowID, "", false, 0)
	ev, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	var status string
	sa := ev.GetWorkflowExecutionStartedEventAttributes().GetSearchAttributes().GetIndexedFields()
	if err := converter.GetDefaultDataConverter().FromPayload(sa["CapflowStatus"], &status); err != nil || status != "running" {
		t.Fatalf("the child started with CapflowStatus %q (%v), want running", status, err)
	}
	recordHistory(t, r.WorkflowID, "sub-plans")
}

// A for_each of 1,200 items on the real server: three child batches, and
// no workflow's history near Temporal's 10,240-event warning; then one of
// 60 regular items in the run's own workflow (its selector rebuilt as they
// end). The history is recorded for the replay test.
func TestForEachAtScale(t *testing.T) {
	plan := forEachPlan("scale", 1200, 60)
	start := time.Now()
	code, r := h.run(t, h.writePlan(t, "scale", plan))
	took := time.Since(start)
	each, regular := r.step(t, "fast"), r.step(t, "regular")
	if code != 0 || r.Status != "passed" || each.ItemCounts == nil || each.ItemCounts.Succeeded != 1200 ||
		regular.ItemCounts == nil || regular.ItemCounts.Succeeded != 60 {
		t.Fatalf("exit %d %s: %s %+v %+v", code, r.Status, r.Message, each.ItemCounts, regular.ItemCounts)
	}
	for _, id := range []string{r.WorkflowID, r.WorkflowID + ".fast.items-1", r.WorkflowID + ".fast.items-3"} {
		n := historyLength(t, id)
		if n == 0 || n > 10240 {
			t.Fatalf("%s: %d events", id, n)
		}
		t.Logf("%s: %d events", id, n)
	}
	t.Logf("1,260 items in %s", took.Round(time.Millisecond))
	recordHistory(t, r.WorkflowID, "for-each-batches")
}

func historyLength(t *testing.T, id string) int {
	t.Helper()
	it := h.client.GetWorkflowHistory(context.Background(), id, "", false, 0)
	n := 0
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		n++
	}
	return n
}
