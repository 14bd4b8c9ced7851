package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/e2e/otherservice"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/schemas"
)

// waitProgress polls a run's progress until ok says so.
func waitProgress(t *testing.T, id, what string, ok func(p *wfapi.Result) bool) *wfapi.Result {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last wfapi.Result
	for time.Now().Before(deadline) {
		if v, err := h.client.QueryWorkflow(context.Background(), id, "", wfapi.ProgressQuery); err == nil && v.Get(&last) == nil && ok(&last) {
			return &last
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s never happened in %s: %+v", what, id, last.Steps)
	return nil
}

func stepOf(p *wfapi.Result, id string) wfapi.StepResult {
	for _, s := range p.Steps {
		if s.ID == id {
			return s
		}
	}
	return wfapi.StepResult{}
}

const controlPlan = `name: control
ask_timeout: 10m
steps:
  - {id: read, capability: file.read, on_failure: ask, retry: {max_attempts: 1}, with: {path: e2e-fixme.txt}}
  - {id: gate, capability: flow.approve, needs: [read], with: {prompt: "Ship it?"}}
  - {id: done, capability: text.render, needs: [gate], with: {template: "{{.a}}", values: {a: "${steps.gate.data.by}"}}}
`

// The way an operator uses run control: a step that fails waits and is
// fixed by retry; the run is paused and resumed; an approval is given; a
// decision that does not fit is refused with exit 2; runs lists the run.
func TestRunControl(t *testing.T) {
	_ = os.Remove(filepath.Join(h.project, "e2e-fixme.txt"))
	file := h.writePlan(t, "control", controlPlan)
	id := startDetached(t, file)
	waitProgress(t, id, "read waiting", func(p *wfapi.Result) bool { return stepOf(p, "read").Status == wfapi.StepWaiting })

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"approve", id, "read"}, "answer with retry or skip or fail"},
		{[]string{"retry", id, "nope"}, `no step "nope"`},
		{[]string{"retry", id, "read", "--timeout", "soon"}, "not a positive duration"},
		{[]string{"resume", id}, "not paused"},
		{[]string{"retry", "no-such-run", "read"}, "no running run"},
	} {
		if code, env, _ := h.capflow(t, c.args...); code != 2 || !strings.Contains(env.Message, c.want) {
			t.Fatalf("%v: exit %d %q, want 2 %q", c.args, code, env.Message, c.want)
		}
	}
	if code, env, _ := h.capflow(t, "pause", id, "--by", "carol"); code != 0 || !strings.Contains(env.Message, "paused by carol") {
		t.Fatalf("pause: exit %d %s", code, env.Message)
	}
	if err := os.WriteFile(filepath.Join(h.project, "e2e-fixme.txt"), []byte("fixed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, env, _ := h.capflow(t, "retry", id, "read", "--timeout", "1m", "--by", "bob"); code != 0 || !strings.Contains(env.Message, "retried by bob") {
		t.Fatalf("retry: exit %d %s", code, env.Message)
	}
	// read succeeds; gate is ready but the run is paused: it does not start.
	waitProgress(t, id, "read succeeded", func(p *wfapi.Result) bool { return stepOf(p, "read").Status == wfapi.StepSucceeded })
	time.Sleep(time.Second)
	code, env, _ := h.capflow(t, "status", id)
	var paused runResult
	data(t, env, &paused)
	if code != 0 || paused.Status != "paused" || paused.step(t, "gate").Status != "pending" {
		t.Fatalf("a second after read, while paused: exit %d %s; gate %s (%s)", code, paused.Status, paused.step(t, "gate").Status, env.Message)
	}
	if code, env, _ := h.capflow(t, "resume", id); code != 0 {
		t.Fatalf("resume: exit %d %s", code, env.Message)
	}
	p := waitProgress(t, id, "gate waiting", func(p *wfapi.Result) bool { return stepOf(p, "gate").Status == wfapi.StepWaiting })
	if w := stepOf(p, "gate").Waiting; w == nil || w.Prompt != "Ship it?" {
		t.Fatalf("gate waits for %+v", w)
	}
	if code, env, _ := h.capflow(t, "approve", id, "gate", "--by", "alice", "--comment", "ok"); code != 0 || !strings.Contains(env.Message, "approved by alice") {
		t.Fatalf("approve: exit %d %s", code, env.Message)
	}
	// The result: every decision on its step, the approval's data used.
	var res wfapi.Result
	if err := h.client.GetWorkflow(context.Background(), id, "").Get(context.Background(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != wfapi.StatusPassed {
		t.Fatalf("%s: %s", res.Status, res.Message)
	}
	read, done := stepOf(&res, "read"), stepOf(&res, "done")
	if len(read.Decisions) != 1 || !strings.HasPrefix(read.Decisions[0].String(), "failed INVALID_INPUT → retried by bob") {
		t.Fatalf("read decisions %+v", read.Decisions)
	}
	if done.Envelope == nil || done.Envelope.Data.(map[string]any)["text"] != "alice" {
		t.Fatalf("done %+v", done.Envelope)
	}
	md, _ := os.ReadFile(res.Report.Markdown)
	if !strings.Contains(string(md), "retried by bob") || !strings.Contains(string(md), "approved by alice") {
		t.Fatalf("the report does not tell the decisions:\n%s", md)
	}
	if code, env, _ := h.capflow(t, "approve", id, "gate"); code != 2 || !strings.Contains(env.Message, "refused: run "+id+" has ended; step gate is succeeded, not waiting; already decided: approved by alice") {
		t.Fatalf("approve after the end: exit %d %s", code, env.Message)
	}
	if code, env, _ := h.capflow(t, "retry", id, "read"); code != 2 || !strings.Contains(env.Message, "has ended") || !strings.Contains(env.Message, "capflow rerun "+id+" --from read") {
		t.Fatalf("retry after the end: exit %d %s", code, env.Message)
	}
	// runs lists it (visibility is eventually consistent).
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, env, _ := h.capflow(t, "runs", "--status", "passed", "--plan", "control")
		var out struct {
			Runs []map[string]any `json:"runs"`
		}
		data(t, env, &out)
		if len(out.Runs) > 0 && out.Runs[0]["workflow_id"] == id && out.Runs[0]["status"] == "passed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs: %+v", out.Runs)
		}
		time.Sleep(500 * time.Millisecond)
	}
	validResult(t, id)
	recordHistory(t, id, "run-control")
}

// rerun: what succeeded, with the same tool and inputs, is reused (no
// tool runs); --from runs that step and what follows again.
func TestRerunReusesWhatSucceeded(t *testing.T) {
	logFile := h.freshLog("rerun.log")
	var plan strings.Builder
	plan.WriteString("name: rerun\nsteps:\n")
	for i, id := range []string{"one", "two", "three"} {
		needs := ""
		if i > 0 {
			needs = ", needs: [" + []string{"one", "two"}[i-1] + "]"
		}
		plan.WriteString("  - {id: " + id + ", capability: test.slow" + needs + ", with: {seconds: 0, log: " + logFile + "}}\n")
	}
	code, first := h.run(t, h.writePlan(t, "rerun", plan.String()))
	if code != 0 {
		t.Fatalf("first run: exit %d %s", code, first.Message)
	}
	starts := func() string {
		b, _ := os.ReadFile(logFile)
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "attempt") {
				out = append(out, strings.Fields(l)[2])
			}
		}
		return strings.Join(out, " ")
	}
	if got := starts(); got != "one two three" {
		t.Fatalf("first run started %q", got)
	}
	code, env, stderr := h.capflow(t, "rerun", first.WorkflowID, "--from", "two")
	var again runResult
	data(t, env, &again)
	if code != 0 || again.Status != "passed" {
		t.Fatalf("rerun: exit %d %s: %s\n%s", code, again.Status, again.Message, stderr)
	}
	if got := starts(); got != "one two three two three" {
		t.Fatalf("after rerun --from two, tools started: %q", got)
	}
	one, two := again.step(t, "one"), again.step(t, "two")
	if one.ReusedFrom != first.WorkflowID || two.ReusedFrom != "" || one.Envelope == nil || !one.Envelope.Success {
		t.Fatalf("one reused from %q, two from %q", one.ReusedFrom, two.ReusedFrom)
	}
	// Everything the same: nothing runs.
	if code, _, _ := h.capflow(t, "rerun", again.WorkflowID); code != 0 || starts() != "one two three two three" {
		t.Fatalf("a plain rerun ran tools: exit %d, %q", code, starts())
	}
	if code, env, _ := h.capflow(t, "rerun", first.WorkflowID, "--from", "tow"); code != 2 || !strings.Contains(env.Message, `no step "tow" (did you mean "two"?) (its steps: one, two, three)`) {
		t.Fatalf("--from tow: exit %d %s", code, env.Message)
	}
	if code, env, _ := h.capflow(t, "rerun", first.WorkflowID, "--from", "nope"); code != 2 || !strings.Contains(env.Message, `no step "nope"`) {
		t.Fatalf("--from nope: exit %d %s", code, env.Message)
	}
	if code, env, _ := h.capflow(t, "rerun", "no-such-run"); code != 2 || !strings.Contains(env.Message, "no run with ID") {
		t.Fatalf("unknown run: exit %d %s", code, env.Message)
	}
}

// capflow run shows what a running step says, as it says it; --verbose
// adds its plain stderr lines.
func TestLiveFeedback(t *testing.T) {
	file := h.writePlan(t, "live", "name: live\nsteps:\n  - {id: nap, capability: test.slow, with: {seconds: 4}}\n")
	code, _, stderr := h.capflowEnv(t, []string{"CAPFLOW_PROGRESS=1"}, "run", file, "--verbose")
	if code != 0 || !strings.Contains(stderr, "↳ nap sleep: ") || !strings.Contains(stderr, "of 4 seconds") || !strings.Contains(stderr, "│ nap: tick 1") {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
}

// The Go client package, as another service uses it (e2e/otherservice
// imports nothing of capflow but client): start a plan object, read
// progress, steer it (a decision sent twice is one), wait for the result.
func TestGoClient(t *testing.T) {
	plan := map[string]any{"name": "from-go", "steps": []any{
		map[string]any{"id": "gate", "capability": "flow.approve", "with": map[string]any{"prompt": "go?"}},
		map[string]any{"id": "sum", "capability": "file.checksum", "needs": []any{"gate"}, "with": map[string]any{"path": "capflow.yaml"}},
	}}
	out, err := otherservice.ApproveAndWait(context.Background(), capflowclient.New(h.client, ""), plan)
	if err != nil {
		t.Fatal(err)
	}
	if out.Refused != "step sum is pending, not waiting" {
		t.Errorf("refused %q", out.Refused)
	}
	if out.First.State != capflowclient.StepSucceeded || !strings.Contains(out.Again, "step gate is succeeded, not waiting; already decided: approved by svc") {
		t.Errorf("approve twice: %+v, then %q", out.First, out.Again)
	}
	res := out.Result
	var sum capflowclient.StepResult
	for _, s := range res.Steps {
		if s.ID == "sum" {
			sum = s
		}
	}
	if res.Status != capflowclient.StatusPassed || sum.Envelope == nil || !sum.Envelope.Success || len(res.Steps[0].Decisions) != 1 {
		t.Fatalf("%+v", res)
	}
	run := struct{ ID string }{res.WorkflowID}
	// The result as any client receives it validates against the schema
	// generated from the workflow's types; so does the input it was given.
	validResult(t, run.ID)
	in := map[string]any{"plan": plan, "inputs": map[string]any{"x": 1}}
	if vs := schema.Embedded("workflow-input.schema.json", schemas.Must("workflow-input.schema.json")).Validate(in); len(vs) > 0 {
		t.Fatalf("an input does not validate: %v", vs)
	}
}

// validResult checks a run's result, as any client receives it, against
// schemas/workflow-result.schema.json (generated from the workflow's types).
func validResult(t *testing.T, id string) {
	t.Helper()
	var raw any
	if err := h.client.GetWorkflow(context.Background(), id, "").Get(context.Background(), &raw); err != nil {
		t.Fatal(err)
	}
	validAgainstResultSchema(t, id, raw)
}

// validAgainstResultSchema checks a value (a workflow result, or the data
// of `capflow run|status|report --output json`) against the schema.
func validAgainstResultSchema(t *testing.T, what string, v any) {
	t.Helper()
	raw, _ := json.Marshal(v)
	var doc any
	_ = json.Unmarshal(raw, &doc)
	if vs := schema.Embedded("workflow-result.schema.json", schemas.Must("workflow-result.schema.json")).Validate(doc); len(vs) > 0 {
		t.Fatalf("%s does not validate against schemas/workflow-result.schema.json: %v", what, vs)
	}
}
