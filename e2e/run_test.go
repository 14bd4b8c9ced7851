package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/examples"
	"github.com/capflow/capflow/internal/wfapi"
)

// runResult is the data of `capflow run --output json`.
type runResult struct {
	Status     string               `json:"status"`
	Message    string               `json:"message"`
	WorkflowID string               `json:"workflow_id"`
	RunID      string               `json:"run_id"`
	Steps      []wfapi.StepResult   `json:"steps"`
	Gaps       []map[string]any     `json:"gaps"`
	Report     wfapi.ReportPaths    `json:"report"`
	Outputs    map[string]any       `json:"outputs"`
	Next       []capflowclient.Next `json:"next"`
	DurationMS int64                `json:"duration_ms"`
}

func (r runResult) step(t *testing.T, id string) wfapi.StepResult {
	t.Helper()
	for _, s := range r.Steps {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no step %s in %+v", id, r.Steps)
	return wfapi.StepResult{}
}

func (h *harness) run(t *testing.T, plan string, args ...string) (int, runResult) {
	t.Helper()
	code, env, stderr := h.capflow(t, append([]string{"run", plan}, args...)...)
	var r runResult
	data(t, env, &r)
	if r.Status == "" {
		t.Fatalf("no status (exit %d): %s\n%s", code, env.Message, stderr)
	}
	return code, r
}

func TestExamplesRunAsPromised(t *testing.T) {
	exit := map[string]int{"passed": 0, "failed": 1, "partial-complete": 3, "blocked_by_policy": 4}
	files, _ := filepath.Glob(filepath.Join(h.repo, "plans/examples/*.yaml"))
	for _, f := range files {
		if examples.NeedsFFmpeg(f) || examples.NeedsModel(f) {
			continue // depends on ffmpeg being installed, or a model server: covered by plan check and plan tests
		}
		check, want, err := examples.Expect(f)
		if err != nil {
			t.Fatal(err)
		}
		if want == "" {
			want = check // plans that cannot run end with their check status
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			var args []string
			if filepath.Base(f) == "media-to-drive.yaml" {
				args = []string{"--input", "url=https://youtu.be/x"}
			}
			code, r := h.run(t, filepath.Join(h.project, "plans/examples", filepath.Base(f)), args...)
			if r.Status != want || code != exit[want] {
				t.Fatalf("status %s exit %d, want %s exit %d: %s", r.Status, code, want, exit[want], r.Message)
			}
			if want == check && want != "passed" && want != "failed" {
				// What plan check refuses, run refuses before anything starts.
				if r.WorkflowID != "" || r.Report.JSON != "" {
					t.Fatalf("a %s plan started %s", want, r.WorkflowID)
				}
				return
			}
			for _, p := range []string{r.Report.JSON, r.Report.Markdown} {
				if b, err := os.ReadFile(p); err != nil || len(b) == 0 {
					t.Fatalf("report %s missing: %v", p, err)
				}
			}
			md, _ := os.ReadFile(r.Report.Markdown)
			if !strings.Contains(string(md), r.Status) || !strings.Contains(string(md), "```mermaid") && len(r.Steps) > 0 {
				t.Fatalf("report.md lacks status or graph:\n%s", md)
			}
		})
	}
	// Running it again replaces its own outputs (the plan says overwrite).
	if code, r := h.run(t, filepath.Join(h.project, "plans/examples/file-pipeline.yaml")); code != 0 || r.Status != "passed" {
		t.Fatalf("second run of file-pipeline: exit %d %s: %s", code, r.Status, r.Message)
	}
	b, err := os.ReadFile(filepath.Join(h.project, ".capflow/out/file-pipeline/MANIFEST.txt"))
	if err != nil || !strings.Contains(string(b), "files 3") || !strings.Contains(string(b), "sha256 ") {
		t.Fatalf("pipeline output: %v\n%s", err, b)
	}
}

func TestQuorumAbsorbsAFailedBranch(t *testing.T) {
	p := h.writePlan(t, "quorum", `name: quorum
steps:
  - {id: a, capability: test.noop}
  - {id: b, capability: test.soft_fail}
  - {id: c, capability: test.noop}
  - {id: join, capability: test.noop, needs: [a, b, c], join: {policy: quorum, min: 2}}
`)
	code, r := h.run(t, p)
	if code != 0 || r.Status != "passed" || r.step(t, "b").Status != "failed" || r.step(t, "join").Status != "succeeded" {
		t.Fatalf("exit %d %s: %+v", code, r.Status, r.Steps)
	}
	recordHistory(t, r.WorkflowID, "quorum-absorbed")
}

func markerGone(t *testing.T, markerFile string) {
	t.Helper()
	b, err := os.ReadFile(markerFile)
	if err != nil {
		t.Fatalf("tool never wrote its marker: %v", err)
	}
	assertGone(t, strings.TrimSpace(string(b)))
}

func TestFailFastStopsSiblings(t *testing.T) {
	p := h.writePlan(t, "failfast", `name: failfast
steps:
  # bad fails once hanging's tool has had time to start (and write the
  # marker the test looks for).
  - {id: head-start, capability: test.slow, with: {seconds: 2}}
  - {id: bad, capability: test.soft_fail, needs: [head-start]}
  - {id: hanging, capability: test.hang, timeout: 5m}
  - {id: after, capability: test.noop, needs: [hanging]}
`)
	start := time.Now()
	code, r := h.run(t, p)
	if code != 1 || r.Status != "failed" {
		t.Fatalf("exit %d status %s", code, r.Status)
	}
	if r.step(t, "bad").Status != "failed" || r.step(t, "hanging").Status != "cancelled" || r.step(t, "after").Status != "skipped" {
		t.Fatalf("states: %+v", r.Steps)
	}
	if time.Since(start) > 60*time.Second {
		t.Fatalf("fail_fast took %s", time.Since(start))
	}
	markerGone(t, filepath.Join(h.project, ".capflow/runs", r.WorkflowID, "steps/hanging/marker"))
	recordHistory(t, r.WorkflowID, "fail-fast")
}

func TestMisbehavingTools(t *testing.T) {
	tests := []struct {
		name, capability, extra string
		code                    string
		contains                string
	}{
		{"hang times out", "test.hang", "timeout: 2s, on_failure: fail", "TASK_TIMEOUT", "timed out"},
		{"garbage output", "test.garbage", "on_failure: fail", "TOOL_FAILURE", "Traceback: something went very wrong"},
		{"exit 0 with success false", "test.soft_fail", "", "TEST_FAILURE", "3 assertions failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := ""
			if tt.extra != "" {
				extra = ", " + tt.extra
			}
			p := h.writePlan(t, strings.ReplaceAll(tt.name, " ", "-"), "name: misbehave\nsteps:\n  - {id: s, capability: "+tt.capability+extra+"}\n")
			code, env, _ := h.capflow(t, "run", p)
			var r runResult
			data(t, env, &r)
			s := r.step(t, "s")
			if code != 1 || r.Status != "failed" || s.Status != "failed" || s.Envelope == nil || s.Envelope.Error == nil || string(s.Envelope.Error.Code) != tt.code {
				t.Fatalf("exit %d %s: %+v", code, r.Status, s)
			}
			// The run's error is TOOL_FAILURE, caused by the step's code,
			// retryable as that code is, or not where the step's failure is
			// final (garbage after exit 0: another attempt does the same).
			cause := map[bool]string{true: "", false: tt.code}[tt.code == "TOOL_FAILURE"]
			retryable := caperr.Lookup(caperr.Code(tt.code)).Retryable
			if tt.code == "TOOL_FAILURE" {
				retryable = s.Envelope.Error.Retryable
			}
			if e := env.Error; e == nil || e.Code != "TOOL_FAILURE" || string(e.Cause) != cause || e.Retryable != retryable {
				t.Fatalf("the run's error: %+v", env.Error)
			}
			// The command waited for the run: its envelope's time holds the run's.
			if env.DurationMS < r.DurationMS || r.DurationMS <= 0 {
				t.Fatalf("the command took %d ms, its run %d ms", env.DurationMS, r.DurationMS)
			}
			all, _ := json.Marshal(s.Envelope)
			if !strings.Contains(string(all), tt.contains) {
				t.Fatalf("envelope lacks %q: %s", tt.contains, all)
			}
			// The run says what next, in its result and its report.
			cmd := "capflow rerun " + r.WorkflowID + " --from s"
			// Its advice names the tool and the input it was given.
			advice := strings.NewReplacer("TOOL", s.Tool, "FILE", filepath.Join(filepath.Dir(r.Report.JSON), "records", "s", "input.json")).Replace(caperr.Advice(caperr.Code(tt.code)))
			if tt.code == "TEST_FAILURE" {
				// Its tool wrote no stderr: no tail to send a person to.
				advice = "read the failed tests in the step's feedback"
			}
			if len(r.Next) != 1 || r.Next[0].Step != "s" || string(r.Next[0].Code) != tt.code || r.Next[0].Severity != "HIGH" || r.Next[0].Command != cmd || r.Next[0].Advice != advice {
				t.Fatalf("next: %+v", r.Next)
			}
			if md, _ := os.ReadFile(r.Report.Markdown); !strings.Contains(string(md), "## What next\n\n- **s** `"+tt.code+"` HIGH: `"+cmd+"`") {
				t.Fatalf("report.md:\n%s", md)
			}
			if tt.code == "TEST_FAILURE" && s.Attempts != 1 {
				t.Fatalf("a non-retryable failure ran %d times", s.Attempts)
			}
			if tt.capability == "test.hang" {
				markerGone(t, filepath.Join(h.project, ".capflow/runs", r.WorkflowID, "steps/s/marker"))
			}
		})
	}
}

func TestGapPlanRunsNothing(t *testing.T) {
	p := h.writePlan(t, "gap", `name: gap
steps:
  - {id: before, capability: test.slow, with: {seconds: 1, log: "`+h.logPath("gap.log")+`"}}
  - {id: download, capability: youtube.download, with: {url: "x"}}
`)
	// capflow run refuses it before anything starts, as plan check does.
	code, r := h.run(t, p)
	if code != 3 || r.Status != "partial-complete" || len(r.Gaps) != 1 || r.WorkflowID != "" {
		t.Fatalf("exit %d %s: %+v", code, r.Status, r)
	}
	// Another Temporal client may start it: the workflow runs nothing.
	plan := map[string]any{"name": "gap", "steps": []any{
		map[string]any{"id": "before", "capability": "test.slow", "with": map[string]any{"seconds": 1, "log": h.logPath("gap.log")}},
		map[string]any{"id": "download", "capability": "youtube.download", "with": map[string]any{"url": "x"}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wf, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "gap-raw-" + time.Now().Format("150405.000"), TaskQueue: "capflow"}, wfapi.WorkflowType, wfapi.Input{Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	var res capflowclient.Result
	if err := wf.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	var before capflowclient.StepState
	for _, s := range res.Steps {
		if s.ID == "before" {
			before = s.Status
		}
	}
	if res.Status != "partial-complete" || len(res.Gaps) != 1 || before != "blocked" {
		t.Fatalf("%s: %+v", res.Status, res)
	}
	if fileExists(h.logPath("gap.log")) {
		t.Fatal("a step ran although the plan has a gap")
	}
	if !fileExists(res.Report.Markdown) {
		t.Fatal("no report for a gap run")
	}
	recordHistory(t, wf.GetID(), "gap")
}

func waitStepRunning(t *testing.T, id, step string) {
	t.Helper()
	waitStep(t, id, step, "running", func(s wfapi.StepState) bool { return s == wfapi.StepRunning })
}

// waitStep polls a run's progress query until a step's state is what
// want accepts (at most a minute).
func waitStep(t *testing.T, id, step, what string, want func(wfapi.StepState) bool) {
	t.Helper()
	var p wfapi.Result
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		v, err := h.client.QueryWorkflow(context.Background(), id, "", wfapi.ProgressQuery)
		if err != nil || v.Get(&p) != nil {
			continue
		}
		for _, s := range p.Steps {
			if s.ID == step && want(s.Status) {
				return
			}
		}
	}
	t.Fatalf("step %s of %s never %s: %s %s %+v", step, id, what, p.Status, p.Message, p.Steps)
}

func TestWorkerKilledMidRunResumes(t *testing.T) {
	t.Parallel()
	w := newOwnWorker(t, "kill")
	log := h.freshLog("kill.log")
	p := h.writePlan(t, "kill", `name: kill
steps:
  - {id: first, capability: test.slow, with: {seconds: 1, log: "`+log+`"}}
  - {id: middle, capability: test.slow, heartbeat: 2s, with: {seconds: 4, log: "`+log+`"}, needs: [first]}
  - {id: last, capability: test.slow, with: {seconds: 1, log: "`+log+`"}, needs: [middle]}
`)
	id := w.detach(p)
	waitLine(t, log, "attempt 1 middle")
	w.restart()
	var res wfapi.Result
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.client.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "passed" {
		t.Fatalf("after the worker was killed: %s %s", res.Status, res.Message)
	}
	recordHistory(t, id, "worker-killed")
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	count := map[string]int{}
	for _, l := range lines {
		if f := strings.Fields(l); f[0] == "attempt" {
			count[f[len(f)-1]]++
		}
	}
	if count["first"] != 1 || count["last"] != 1 || count["middle"] < 2 {
		t.Fatalf("attempts per step %v (a finished step must never run again; the interrupted one runs again):\n%s", count, b)
	}
}

func TestCancelStopsTools(t *testing.T) {
	p := h.writePlan(t, "cancel", `name: cancel
steps:
  - {id: hanging, capability: test.hang, timeout: 10m}
  - {id: after, capability: test.noop, needs: [hanging]}
`)
	code, env, _ := h.capflow(t, "run", p, "--detach")
	var started map[string]any
	data(t, env, &started)
	id := started["workflow_id"].(string)
	if code != 0 {
		t.Fatal(env.Message)
	}
	waitStepRunning(t, id, "hanging")
	// Running is scheduled: cancel once the tool has started.
	waitFile(t, filepath.Join(h.project, ".capflow/runs", id, "steps/hanging/marker"))
	code, env, _ = h.capflow(t, "cancel", id)
	var r runResult
	data(t, env, &r)
	if code != 5 || r.Status != "cancelled" || r.step(t, "hanging").Status != "cancelled" || r.step(t, "after").Status != "cancelled" {
		t.Fatalf("exit %d: %+v", code, r)
	}
	if !fileExists(r.Report.JSON) {
		t.Fatal("a cancelled run must leave its report")
	}
	recordHistory(t, id, "cancelled")
	markerGone(t, filepath.Join(h.project, ".capflow/runs", id, "steps/hanging/marker"))
	// status and report of an ended run
	code, env, _ = h.capflow(t, "status", id)
	if code != 5 || !strings.Contains(env.Message, "cancelled") {
		t.Fatalf("status: exit %d %s", code, env.Message)
	}
	if code, _, _ = h.capflow(t, "report", id); code != 5 {
		t.Fatalf("report: exit %d", code)
	}
	if code, env, _ = h.capflow(t, "status", "no-such-run"); code != 2 {
		t.Fatalf("unknown id: exit %d %s", code, env.Message)
	}
}
