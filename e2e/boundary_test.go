package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/capflow/capflow/internal/wfapi"
)

// startRaw starts PlanWorkflow as a foreign client would, with any JSON.
func startRaw(t *testing.T, id string, input any) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "capflow"}, wfapi.WorkflowType, input)
	if err != nil {
		t.Fatal(err)
	}
	var r runResult
	if err := run.Get(ctx, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// A client that sends the engine's own carry (today's resume shape, with
// a real tool digest, the folder "/" and a step the policy would deny), or
// any field the contract does not list, gets a failed run naming the
// field: nothing is read, written or run.
func TestForgedCarryIsRefused(t *testing.T) {
	code, env, _ := h.capflow(t, "tools", "resolve", "file.write")
	var tr struct {
		Chosen struct{ Name, Version, Digest string } `json:"chosen"`
	}
	data(t, env, &tr)
	if code != 0 || tr.Chosen.Name == "" {
		t.Fatalf("resolve file.write: exit %d %+v", code, tr)
	}
	marker := filepath.Join(h.tmp, "forged-write.txt")
	forged := map[string]any{"resume": map[string]any{
		"segment": 1, "first_run_id": "x", "started_at": "2026-01-01T00:00:00Z", "states": "p",
		"resolved": map[string]any{"status": "ready", "plan": "forged", "run_dir": "/", "failure_policy": "fail_fast", "max_parallel": 1,
			"steps": []any{map[string]any{"id": "w", "capability": "file.write", "tool": tr.Chosen.Name, "version": tr.Chosen.Version,
				"digest": tr.Chosen.Digest, "timeout": int64(time.Minute), "max_attempts": 1, "join": map[string]any{"policy": "all"},
				"with": map[string]any{"path": marker, "content": "forged"}}}},
		"outcomes": map[string]any{"w0": map[string]any{"success": true, "data_file": "/etc/passwd"}},
	}}
	for _, c := range []struct {
		name  string
		input any
		field string
	}{
		{"forged carry", forged, "resume"},
		{"junk option", map[string]any{"plan": map[string]any{"name": "x"}, "run_dir": "/"}, "run_dir"},
		{"inputs not an object", map[string]any{"plan": map[string]any{"name": "x"}, "inputs": []int{1}}, "inputs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "e2e-refused-" + strings.ReplaceAll(c.name, " ", "-")
			r := startRaw(t, id, c.input)
			if r.Status != "failed" || !strings.HasPrefix(r.Message, "INVALID_INPUT:") || !strings.Contains(r.Message, c.field) {
				t.Fatalf("%s: %s", r.Status, r.Message)
			}
			if r.Report.JSON != "" {
				t.Fatalf("a refused run wrote a report: %s", r.Report.JSON)
			}
			if _, err := os.Stat(filepath.Join(h.project, ".capflow", "runs", id)); err == nil {
				t.Fatal("a refused run made its run folder")
			}
			if c.field == "resume" {
				recordHistory(t, id, "refused-input")
			}
		})
	}
	for _, p := range []string{marker, "/report.json", "/steps"} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s exists: the forged carry ran", p)
		}
	}
}

// Workflow IDs that differ only in characters a folder name cannot hold
// keep separate run folders and reports.
func TestRunFoldersOfSimilarIDs(t *testing.T) {
	plan := func(text string) map[string]any {
		return map[string]any{"name": "folders", "steps": []any{map[string]any{"id": "say", "capability": "text.render", "with": map[string]any{"template": text}}}}
	}
	a := startRaw(t, "team/a", map[string]any{"plan": plan("from team/a")})
	b := startRaw(t, "team_a", map[string]any{"plan": plan("from team_a")})
	if a.Status != "passed" || b.Status != "passed" || a.Report.JSON == b.Report.JSON {
		t.Fatalf("%s %s, reports %s and %s", a.Status, b.Status, a.Report.JSON, b.Report.JSON)
	}
	for _, r := range []struct {
		res  runResult
		want string
	}{{a, "from team/a"}, {b, "from team_a"}} {
		raw, err := os.ReadFile(r.res.Report.JSON)
		if err != nil || !strings.Contains(string(raw), r.want) {
			t.Fatalf("%s: report %s lacks %q (%v)", r.res.WorkflowID, r.res.Report.JSON, r.want, err)
		}
		if rel, _ := filepath.Rel(filepath.Join(h.project, ".capflow", "runs"), r.res.Report.JSON); strings.HasPrefix(rel, "..") {
			t.Fatalf("report outside runs_dir: %s", r.res.Report.JSON)
		}
	}
}

// A tool whose envelope is megabytes (a 3 MB message, 30,000 feedback
// entries) succeeds: what its result carries is cut, the whole envelope is
// in the step folder.
func TestHugeEnvelopeIsCut(t *testing.T) {
	file := h.writePlan(t, "loud", "name: loud\nsteps:\n  - {id: loud, capability: test.loud}\n")
	code, env, stderr := h.capflow(t, "run", file, "--id", "e2e-loud")
	var r runResult
	data(t, env, &r)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s\n%s", code, r.Status, r.Message, stderr)
	}
	validAgainstResultSchema(t, "capflow run --output json data", env.Data)
	if m, _ := env.Data.(map[string]any); m["started_at"] == "" || m["url"] == nil || m["warnings"] != nil {
		t.Fatalf("run data is not the workflow result plus url: %v", m)
	}
	for _, cmd := range []string{"status", "report"} {
		_, env, _ := h.capflow(t, cmd, "e2e-loud")
		validAgainstResultSchema(t, "capflow "+cmd+" --output json data", env.Data)
	}
	s := r.step(t, "loud")
	if s.Envelope == nil || len(s.Envelope.Message) > 4<<10 || !strings.HasPrefix(s.Envelope.Message, "LOUD-START") || len(s.Envelope.Feedback) > 100 {
		t.Fatalf("the envelope was not cut: message %d bytes, %d feedback", len(s.Envelope.Message), len(s.Envelope.Feedback))
	}
	last := s.Envelope.Feedback[len(s.Envelope.Feedback)-1]
	if !strings.Contains(last.Message, "dropped") || !strings.Contains(last.Message, s.EnvelopeFile) {
		t.Fatalf("last feedback entry: %s", last.Message)
	}
	raw, err := os.ReadFile(s.EnvelopeFile)
	if err != nil || !strings.Contains(string(raw), "LOUD-END") || !strings.Contains(string(raw), "entry 30000 ") {
		t.Fatalf("the step folder lacks the whole envelope (%v)", err)
	}
	if n := payloadWarnings(t); n > 0 {
		t.Fatalf("%d payload warnings in the worker log", n)
	}
}

// payloadWarnings counts the SDK's and server's payload-size complaints in
// the worker log.
func payloadWarnings(t *testing.T) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(h.workerLog(), "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "exceeds size limit") || strings.Contains(l, "payload size") || strings.Contains(l, "blobsizelimit") {
			n++
		}
	}
	return n
}

// 12,000 independent local steps: the segments' checkpoints and carries go
// to the run folder in parts, so the run finishes, every history stays
// small and no payload warning is logged.
func TestTwelveThousandLocalSteps(t *testing.T) {
	const n = 12000
	var b strings.Builder
	fmt.Fprintf(&b, "name: twelve-thousand\nmax_parallel: 200\nsteps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: r%d, capability: text.render, with: {template: \"step %d\"}}\n", i, i)
	}
	file := h.writePlan(t, "twelve-thousand", b.String())
	start := time.Now()
	code, env, stderr := h.capflow(t, "run", file, "--id", "e2e-twelve-thousand")
	var r struct {
		runResult
		StepCounts map[string]int `json:"step_counts"`
		Segments   int            `json:"segments"`
	}
	data(t, env, &r)
	if code != 0 || r.Status != "passed" || r.StepCounts["succeeded"] != n {
		t.Fatalf("exit %d %s: %s (counts %v)\n%s", code, r.Status, r.Message, r.StepCounts, stderr)
	}
	lengths, sizes := chainHistories(t, r.WorkflowID, r.RunID)
	for i := range lengths {
		if lengths[i] > 10240 || sizes[i] > 10<<20 {
			t.Fatalf("history %d: %d events, %d bytes", i, lengths[i], sizes[i])
		}
	}
	raw, _ := json.Marshal(env.Data)
	if len(raw) > 512<<10 {
		t.Fatalf("the result is %d KB", len(raw)>>10)
	}
	if w := payloadWarnings(t); w > 0 {
		t.Fatalf("%d payload warnings in the worker log", w)
	}
	t.Logf("%d local steps in %s, %d segments, histories %v events, %v bytes", n, time.Since(start).Round(time.Millisecond), r.Segments, lengths, sizes)
}

// A step of 1.2 MB is invalid before the run, naming it (check and run).
func TestOversizedStepIsInvalid(t *testing.T) {
	body := "name: oversized\nsteps:\n  - {id: fine, capability: text.render, with: {template: ok}}\n  - id: huge\n    capability: text.render\n    with: {template: \"" + strings.Repeat("x", 1200<<10) + "\"}\n"
	file := h.writePlan(t, "oversized", body)
	for _, cmd := range [][]string{{"plan", "check", file}, {"run", file}} {
		code, env, _ := h.capflow(t, cmd...)
		raw, _ := json.Marshal(env.Data)
		if code != 2 || !strings.Contains(string(raw), `step \"huge\" is 1200 KB`) || !strings.Contains(string(raw), `"steps[1]"`) {
			t.Fatalf("%v: exit %d, %.300s", cmd, code, raw)
		}
	}
}

// Steps whose input would pass 256 KB in history (a 600 KB with; three
// 200 KB outputs read by one consumer) get it by reference: the run
// passes, the tools see every byte, no activity input in history passes
// 512 KB and no payload warning is logged.
func TestLargeInputsTravelByReference(t *testing.T) {
	chunk := strings.Repeat("a", 200<<10)
	var b strings.Builder
	b.WriteString("name: large-inputs\nsteps:\n")
	b.WriteString("  - {id: wide, capability: test.render, with: {template: \"" + strings.Repeat("w", 600<<10) + "\"}}\n")
	for _, id := range []string{"p1", "p2", "p3"} {
		fmt.Fprintf(&b, "  - {id: %s, capability: test.render, with: {template: \"%s\"}}\n", id, chunk)
	}
	b.WriteString("  - {id: join, capability: test.render, with: {template: \"${steps.p1.data.text}${steps.p2.data.text}${steps.p3.data.text}\"}}\n")
	file := h.writePlan(t, "large-inputs", b.String())
	code, env, stderr := h.capflow(t, "run", file, "--id", "e2e-large-inputs")
	var r runResult
	data(t, env, &r)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s\n%s", code, r.Status, r.Message, stderr)
	}
	join, wide := r.step(t, "join"), r.step(t, "wide")
	raw, err := os.ReadFile(join.DataFile)
	if err != nil || !strings.Contains(string(raw), `"bytes":`+fmt.Sprint(600<<10)) {
		t.Fatalf("join's output: %v %.200s", err, raw)
	}
	if wide.DataFile == "" {
		t.Fatalf("wide's 600 KB output is not stored by reference: %+v", wide)
	}
	it := h.client.GetWorkflowHistory(context.Background(), r.WorkflowID, r.RunID, false, 0)
	spilled := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil {
			continue
		}
		if n := proto.Size(a.GetInput()); n > 512<<10 {
			t.Fatalf("activity %s has a %d KB input", a.GetActivityId(), n>>10)
		}
		for _, p := range a.GetInput().GetPayloads() {
			if strings.Contains(string(p.GetData()), `"spilled":{"name":"input-`) {
				spilled++
			}
		}
	}
	if spilled != 2 {
		t.Errorf("%d spilled inputs, want 2 (wide and join)", spilled)
	}
	if n := payloadWarnings(t); n > 0 {
		t.Fatalf("%d payload warnings in the worker log", n)
	}
	recordHistory(t, "e2e-large-inputs", "spill-inputs")
}

// A batch of for_each items whose values pass 256 KB (500 items of 1 KB,
// inline in the plan) starts its child ItemsWorkflow with a reference to
// its input in the run folder; every item still runs with its value.
func TestLargeBatchTravelsByReference(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: large-batch\nsteps:\n  - id: fan\n    capability: test.render\n    for_each: [")
	for i := 0; i < 600; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "\"%04d%s\"", i, strings.Repeat("v", 1020))
	}
	b.WriteString("]\n    max_parallel: 50\n    with: {template: \"${item}\"}\n")
	file := h.writePlan(t, "large-batch", b.String())
	code, env, stderr := h.capflow(t, "run", file, "--id", "e2e-large-batch")
	var r runResult
	data(t, env, &r)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s\n%s", code, r.Status, r.Message, stderr)
	}
	if c := r.step(t, "fan").ItemCounts; c == nil || c.Succeeded != 600 {
		t.Fatalf("items %+v", c)
	}
	for batch, wantSpilled := range map[int]bool{1: true, 2: false} {
		it := h.client.GetWorkflowHistory(context.Background(), fmt.Sprintf("e2e-large-batch.fan.items-%d", batch), "", false, 0)
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		in := ev.GetWorkflowExecutionStartedEventAttributes().GetInput()
		spilled := strings.Contains(string(in.GetPayloads()[0].GetData()), `"spilled":{"name":"items-`)
		if n := proto.Size(in); n > 512<<10 || spilled != wantSpilled {
			t.Errorf("batch %d: input %d KB, spilled %v", batch, n>>10, spilled)
		}
	}
	if n := payloadWarnings(t); n > 0 {
		t.Fatalf("%d payload warnings in the worker log", n)
	}
}
