package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/wfapi"
)

// largePlan is a plan of n independent steps (a builtin each) and a last
// step that reads the first and the last of them: it runs in a later
// segment than the first, so it reads data carried across continue-as-new.
func largePlan(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: large\nmax_parallel: 64\npolicy: {limits: {max_parallel: 64}}\n")
	fmt.Fprintf(&b, "outputs: {first: \"${steps.w0.data.text}\", total: \"${steps.total.data.text}\"}\nsteps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: w%d, capability: test.render, with: {template: \"item {{.n}} of a large plan\", values: {n: %d}}}\n", i, i)
	}
	fmt.Fprintf(&b, "  - id: total\n    capability: test.render\n    with: {template: \"{{.a}} / {{.b}}\", values: {a: \"${steps.w0.data.text}\", b: \"${steps.w%d.data.text}\"}}\n", n-1)
	return b.String()
}

// chainHistories returns the length (events) and size (bytes) of every
// history of a run that continued as new, first run first.
func chainHistories(t testing.TB, id, runID string) (lengths, sizes []int) {
	t.Helper()
	for runID != "" && len(lengths) < 100 {
		it := h.client.GetWorkflowHistory(context.Background(), id, runID, false, 0)
		n, bytes, next := 0, 0, ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("%s/%s: %v", id, runID, err)
			}
			n++
			bytes += proto.Size(ev)
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		lengths, sizes = append(lengths, n), append(sizes, bytes)
		runID = next
	}
	return lengths, sizes
}

// A plan of 2,500 steps on the real server: sent by path (too large for a
// workflow input), its resolved steps loaded in pages, run in segments
// that each stay far below Temporal's 10,240-event warning, with a small
// result and a full report.
func TestLargePlanContinuesAsNew(t *testing.T) {
	const n = 2500
	file := h.writePlan(t, "large", largePlan(n))
	start := time.Now()
	code, env, stderr := h.capflow(t, "run", file)
	took := time.Since(start)
	var r struct {
		runResult
		StepCounts   map[string]int `json:"step_counts"`
		StepsOmitted int            `json:"steps_omitted"`
		Segments     int            `json:"segments"`
	}
	data(t, env, &r)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s\n%s", code, r.Status, r.Message, stderr)
	}
	if r.Segments < 1 || r.StepCounts["succeeded"] != n+1 || r.StepsOmitted != n+1 || len(r.Steps) != 0 {
		t.Fatalf("segments %d, counts %v, omitted %d, listed %d", r.Segments, r.StepCounts, r.StepsOmitted, len(r.Steps))
	}
	if r.Outputs["first"] != "item 0 of a large plan" || r.Outputs["total"] != fmt.Sprintf("item 0 of a large plan / item %d of a large plan", n-1) {
		t.Fatalf("outputs %v", r.Outputs)
	}
	raw, _ := json.Marshal(env.Data)
	if len(raw) > 512<<10 {
		t.Fatalf("the result is %d KB", len(raw)>>10)
	}
	validResult(t, r.WorkflowID)
	// The plan travelled by path: the first event holds no plan value.
	it := h.client.GetWorkflowHistory(context.Background(), r.WorkflowID, r.RunID, false, 0)
	first, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	var in wfapi.Input
	if err := json.Unmarshal(first.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &in); err != nil {
		t.Fatal(err)
	}
	if in.Plan != nil || in.PlanFile != "e2e-plans/large.yaml" {
		t.Fatalf("input plan_file %q, plan set %v", in.PlanFile, in.Plan != nil)
	}
	// Its steps, packed, fit the Resolve result: the first segment loads no
	// page (the later ones do, from their lean carry).
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == wfapi.LoadStepsActivity {
			t.Fatalf("the first segment loaded the resolved steps (event %d)", ev.GetEventId())
		}
	}
	lengths, sizes := chainHistories(t, r.WorkflowID, r.RunID)
	if len(lengths) != r.Segments+1 {
		t.Fatalf("%d histories for %d segments", len(lengths), r.Segments)
	}
	for i, l := range lengths {
		if l > 10240 || sizes[i] > 10<<20 {
			t.Fatalf("history %d has %d events, %d bytes", i, l, sizes[i])
		}
	}
	// The report has every step, each with its envelope read back.
	b, err := os.ReadFile(r.Report.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var doc report.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Result.Steps) != n+1 || len(doc.Resolved.Steps) != n+1 {
		t.Fatalf("report: %d steps, %d resolved", len(doc.Result.Steps), len(doc.Resolved.Steps))
	}
	for i, s := range doc.Result.Steps {
		if s.Status != wfapi.StepSucceeded || s.Envelope == nil || !s.Envelope.Success || s.Attempts != 1 {
			t.Fatalf("report step %d: %+v", i, s)
		}
	}
	t.Logf("%d steps in %s (%.1f ms a step), %d segments, histories %v events, %v bytes", n+1, took.Round(time.Millisecond), float64(took.Milliseconds())/(n+1), r.Segments, lengths, sizes)
}

// segmentedPlan mixes what must keep its meaning across continue-as-new:
// a chain, a for_each, a condition and a consumer reading the first
// step's data, a failure absorbed by continue_all and the step it skips.
const segmentedPlan = `name: segmented
failure_policy: continue_all
outputs: {first: "${steps.s0.data.text}", items: "${steps.each.data.count}"}
steps:
  - {id: s0, capability: test.render, with: {template: "first"}}
%s  - id: each
    capability: test.render
    needs: [s39]
    for_each: [1, 2, 3]
    with: {template: "item {{.n}}", values: {n: "${item}"}}
  - id: guarded
    capability: test.render
    needs: [each]
    when: steps.s0.data.text == "first" && steps.each.data.succeeded == 3
    with: {template: "{{.a}}", values: {a: "${steps.s0.data.text}"}}
  - {id: bad, capability: file.read, needs: [s10], with: {path: no-such-file.txt}}
  - {id: after-bad, capability: test.render, needs: [bad], with: {template: "never"}}
`

// A run on a worker that continues as new every 100 events: every step's
// meaning holds across segments, and the first and last segments' histories
// are recorded for the replay test.
func TestSegmentedRunKeepsItsMeaning(t *testing.T) {
	const queue = "capflow-segments"
	workerAt(t, h.project, "CAPFLOW_TEMPORAL_SEGMENT_EVENTS=100", "CAPFLOW_TEMPORAL_TASK_QUEUE="+queue)
	var chain strings.Builder
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&chain, "  - {id: s%d, capability: test.render, needs: [s%d], with: {template: \"s%d\"}}\n", i, i-1, i)
	}
	file := h.writePlan(t, "segmented", fmt.Sprintf(segmentedPlan, chain.String()))
	code, env, stderr := h.capflow(t, "run", file, "--task-queue", queue)
	var r struct {
		runResult
		Segments int `json:"segments"`
	}
	data(t, env, &r)
	if code != 1 || r.Status != "failed" || !strings.Contains(r.Message, "step bad failed") {
		t.Fatalf("exit %d %s: %s\n%s", code, r.Status, r.Message, stderr)
	}
	if r.Segments < 2 {
		t.Fatalf("%d segments, want at least 2", r.Segments)
	}
	states := map[string]wfapi.StepState{}
	for _, s := range r.Steps {
		states[s.ID] = s.Status
	}
	for id, want := range map[string]wfapi.StepState{"s0": "succeeded", "s39": "succeeded", "each": "succeeded", "guarded": "succeeded", "bad": "failed", "after-bad": "skipped"} {
		if states[id] != want {
			t.Fatalf("%s is %s, want %s: %v", id, states[id], want, states)
		}
	}
	if r.Outputs["first"] != "first" || r.Outputs["items"] != float64(3) {
		t.Fatalf("outputs %v", r.Outputs)
	}
	g := r.step(t, "guarded")
	if g.Envelope == nil || g.Envelope.Data.(map[string]any)["text"] != "first" {
		t.Fatalf("guarded read %+v", g.Envelope)
	}
	lengths, _ := chainHistories(t, r.WorkflowID, r.RunID)
	if len(lengths) != r.Segments+1 {
		t.Fatalf("%d histories for %d segments", len(lengths), r.Segments)
	}
	for i, l := range lengths {
		if l > 100+60 {
			t.Fatalf("segment %d has %d events (threshold 100)", i, l)
		}
	}
	validResult(t, r.WorkflowID)
	recordRun(t, r.WorkflowID, r.RunID, "segments-first")
	recordHistory(t, r.WorkflowID, "segments-last")
}

// A service that starts a run by plan_file with a broken multi-megabyte
// plan gets an invalid result naming the file, line and field; the run's
// history records no copy of the plan (it would pass Temporal's 2 MB
// payload limit and end the run without a word).
// A plan of 20,000 broken steps, started by plan_file from a service:
// the result lists the first wfapi.MaxListed gaps or problems and counts
// the rest, the report has them all, and no history nears the payload
// limits (the whole list in one result once ended the run unheard).
func TestThousandsOfGapsAndProblems(t *testing.T) {
	const n = 20000
	for _, c := range []struct {
		name, capability, id string
		status               wfapi.RunStatus
	}{
		{"gaps", "nope.nothing", "w%d", wfapi.StatusPartialComplete},
		{"problems", "test.render", "bad %d", wfapi.StatusInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("name: many\npolicy: {limits: {max_steps: 50000}}\nsteps:\n")
			for i := 0; i < n; i++ {
				fmt.Fprintf(&b, "  - {id: \""+c.id+"\", capability: %s}\n", i, c.capability)
			}
			h.writePlan(t, "many-"+c.name, b.String())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			run, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "many-" + c.name, TaskQueue: "capflow"}, wfapi.WorkflowType,
				wfapi.Input{PlanFile: "e2e-plans/many-" + c.name + ".yaml"})
			if err != nil {
				t.Fatal(err)
			}
			var res wfapi.Result
			if err := run.Get(ctx, &res); err != nil {
				t.Fatal(err)
			}
			listed, omitted := len(res.Gaps), 0
			if c.name == "problems" {
				listed = len(res.Problems)
			}
			if res.Omitted != nil {
				omitted = res.Omitted.Gaps + res.Omitted.Problems
			}
			if res.Status != c.status || listed != wfapi.MaxListed || omitted != n-wfapi.MaxListed {
				t.Fatalf("%s: %d listed, %d omitted (%+v): %s", res.Status, listed, omitted, res.Omitted, res.Message)
			}
			if c.name == "problems" && !strings.Contains(res.Message, "(and 19999 more)") {
				t.Fatalf("message %q", res.Message)
			}
			raw, err := os.ReadFile(res.Report.JSON)
			if err != nil {
				t.Fatal(err)
			}
			var doc report.Document
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if got := len(doc.Result.Gaps) + len(doc.Result.Problems); got != n {
				t.Fatalf("the report has %d gaps and problems, want %d", got, n)
			}
			// The run still loads the stored steps in pages (~2 MB for 20,000
			// steps, as a large plan that runs), far from the 10 MB warning.
			_, sizes := chainHistories(t, run.GetID(), run.GetRunID())
			if len(sizes) != 1 || sizes[0] > 4<<20 {
				t.Fatalf("histories of %v bytes", sizes)
			}
		})
	}
}

func TestInvalidLargePlanFile(t *testing.T) {
	body := largePlan(20000) + "  - {id: bad step, capability: test.render}\n"
	if len(body) < 2<<20 {
		t.Fatalf("the plan is %d bytes, want over 2 MB", len(body))
	}
	h.writePlan(t, "large-invalid", body)
	lines := strings.Count(body, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "large-invalid-run", TaskQueue: "capflow"}, wfapi.WorkflowType,
		wfapi.Input{PlanFile: "e2e-plans/large-invalid.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	var res wfapi.Result
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != wfapi.StatusInvalid || res.Plan != "large" || len(res.Problems) == 0 {
		t.Fatalf("%s (%s): %+v", res.Status, res.Plan, res.Problems)
	}
	p := res.Problems[0]
	if p.File != "e2e-plans/large-invalid.yaml" || p.Line != lines || p.Field != "steps[20001].id" || p.Code != "INVALID_INPUT" {
		t.Fatalf("problem %+v, want the file, line %d, steps[20001].id", p, lines)
	}
	lengths, sizes := chainHistories(t, run.GetID(), run.GetRunID())
	if len(lengths) != 1 || sizes[0] > 256<<10 {
		t.Fatalf("histories %v events, %v bytes", lengths, sizes)
	}
}
