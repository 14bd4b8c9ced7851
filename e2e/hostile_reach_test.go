package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/capflow/capflow/internal/wfapi"
)

// The standing hostile suite's part for what a run can reach (docs/
// security.md): each test reproduces a finding of the audit at 6003afe,
// numbered as there, against the real server, worker and tools.

// gatedRun starts a run that waits at an approval gate, and returns its ID.
func gatedRun(t *testing.T, name string) string {
	t.Helper()
	id := startDetached(t, h.writePlan(t, name, "name: "+name+"\nsteps:\n  - {id: gate, capability: flow.approve, with: {prompt: ship?}}\n"))
	waitStep(t, id, "gate", "waiting", func(s wfapi.StepState) bool { return s == wfapi.StepWaiting })
	t.Cleanup(func() { h.capflow(t, "cancel", id) })
	return id
}

// TestHostileRunReachesNoTemporal (1): a plan's http.request reaches
// neither Temporal's frontend nor anything else of this machine's
// loopback: refused POLICY_BLOCKED on the resolved address, and the
// other run's gate still waits.
func TestHostileRunReachesNoTemporal(t *testing.T) {
	gated := gatedRun(t, "reach-gate")
	_, port, _ := strings.Cut(h.address, ":")
	plan := h.writePlan(t, "reach-temporal", fmt.Sprintf(`name: reach-temporal
failure_policy: continue_all
steps:
  - {id: list, capability: http.request, with: {url: "http://localhost:%s/api/v1/namespaces/default/workflows"}}
  - id: decide
    capability: http.request
    with:
      url: "http://127.0.0.1:%s/api/v1/namespaces/default/workflows/%s/update/decide"
      method: POST
      json: {request: {input: {name: decide, args: {payloads: [{step: gate, action: approve, by: plan}]}}}}
  - {id: metadata, capability: http.request, with: {url: "http://169.254.169.254/latest/meta-data/", timeout_ms: 2000}}
`, port, port, gated))
	code, r := h.run(t, plan)
	for _, id := range []string{"list", "decide", "metadata"} {
		st := r.step(t, id)
		if st.Envelope == nil || st.Envelope.Error == nil || st.Envelope.Error.Code != "POLICY_BLOCKED" || !strings.Contains(st.Envelope.Message, "network.allow") {
			t.Errorf("%s: %+v", id, st.Envelope)
		}
	}
	if code == 0 {
		t.Fatalf("the run passed")
	}
	waitStep(t, gated, "gate", "still waiting", func(s wfapi.StepState) bool { return s == wfapi.StepWaiting })
}

// TestHostileMCPHTTPRefusesAPlan (2): `capflow mcp --http` without a
// token says who may drive it; a plan's request, even where the policy
// lets the run reach the address, is refused by the server itself.
func TestHostileMCPHTTPRefusesAPlan(t *testing.T) {
	gated := gatedRun(t, "mcp-gate")
	addr := freePort()
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), "mcp", "--http", addr, "--project", h.project)
	cmd.Env = h.env()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	warned := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var all strings.Builder
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "anyone on this machine") {
				warned <- all.String()
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-warned:
	case <-time.After(15 * time.Second):
		t.Fatal("capflow mcp --http without a token did not say who may drive it")
	}
	allowNetwork(t, h.project, addr)
	plan := h.writePlan(t, "mcp-drive", fmt.Sprintf(`name: mcp-drive
steps:
  - id: init
    capability: http.request
    with:
      url: http://%s/
      method: POST
      headers: {Accept: "application/json, text/event-stream"}
      json: {jsonrpc: "2.0", id: 1, method: initialize, params: {protocolVersion: "2025-06-18", capabilities: {}, clientInfo: {name: plan, version: "1"}}}
`, addr))
	_, r := h.run(t, plan)
	st := r.step(t, "init")
	if d, _ := st.Envelope.Data.(map[string]any); fmt.Sprint(d["status"]) != "403" || !strings.Contains(fmt.Sprint(d["body"]), "a plan's step may not drive capflow mcp") {
		t.Fatalf("the plan's request to capflow mcp: %+v", st.Envelope)
	}
	waitStep(t, gated, "gate", "still waiting", func(s wfapi.StepState) bool { return s == wfapi.StepWaiting })
}

// TestHostileParentConfig (6): a capflow.yaml in a folder others may
// write, owned by another user, is not taken by the CLI or the worker
// started beneath it: both say which file and how to trust it.
func TestHostileParentConfig(t *testing.T) {
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(shared, "victim")
	_ = os.Mkdir(victim, 0o755)
	evil := filepath.Join(shared, "capflow.yaml")
	_ = os.WriteFile(evil, []byte("tools_dirs: [evil-tools]\ntemporal: {address: 127.0.0.1:1}\n"), 0o644)
	if os.Geteuid() == 0 {
		_ = os.Chown(evil, 4242, 4242)
	}
	cli := exec.Command(filepath.Join(h.bin, "capflow"), "tools", "list", "--output", "json")
	cli.Dir, cli.Env = victim, h.env()
	code, out, errb := runCmd(t, cli)
	if code != 2 || !strings.Contains(out.String(), evil) || !strings.Contains(out.String(), "CAPFLOW_TRUSTED_DIRS") {
		t.Fatalf("the CLI: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	worker := exec.Command(filepath.Join(h.bin, "capflow-worker"))
	worker.Dir, worker.Env = victim, h.env()
	wcode, wout, werr := runCmd(t, worker)
	if wcode != 2 || !strings.Contains(wout.String()+werr.String(), evil) {
		t.Fatalf("the worker: exit %d\n%s\n%s", wcode, wout.String(), werr.String())
	}
}

// TestHostileLimitCrowd (8): 250 items of a concurrency-1 tool, 100 at
// once, all wait their turn and pass; none fails INTERNAL_ERROR.
func TestHostileLimitCrowd(t *testing.T) {
	t.Parallel()
	w := newOwnWorker(t, "limit-crowd")
	items := make([]string, 250)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	plan := h.writePlan(t, "limit-crowd", `name: limit-crowd
steps:
  - id: each
    capability: test.lim1
    for_each: [`+strings.Join(items, ", ")+`]
    max_parallel: 100
    with: {n: "${item}"}
    timeout: 300s
`)
	code, r := w.run(plan)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
}

// TestHostileLimitIDs (9): a workflow of another kind under a limit's ID
// fails the step at once, naming it; a run never takes a limit's ID.
func TestHostileLimitIDs(t *testing.T) {
	t.Parallel()
	w := newOwnWorker(t, "limit-ids")
	id := wfapi.LimitWorkflowID("capflow-limit-ids", "tool lim1", "")
	ctx := context.Background()
	_ = h.client.TerminateWorkflow(ctx, id, "", "the test takes the ID") // an earlier test's limit
	if _, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "void", WorkflowExecutionErrorWhenAlreadyStarted: true}, "Nope"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.client.TerminateWorkflow(ctx, id, "", "test over") })
	plan := h.writePlan(t, "limit-taken", "name: limit-taken\nsteps:\n  - {id: one, capability: test.lim1, timeout: 40s}\n")
	start := time.Now()
	_, r := w.run(plan)
	st := r.step(t, "one")
	if st.Envelope == nil || st.Envelope.Error == nil || st.Envelope.Error.Code != "CONFIG_ERROR" || !strings.Contains(st.Envelope.Message, "taken by a Nope workflow") {
		t.Fatalf("a limit's ID taken: %+v", st.Envelope)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("the step waited %s for a workflow that answers nothing", took)
	}
	code, env, _ := w.capflow("run", plan, "--id", "capflow-limit:capflow-limit-ids:tool:lim1", "--detach")
	if code != 2 || !strings.Contains(env.Message, "capflow's limits'") {
		t.Fatalf("run --id of a limit's ID: exit %d %s", code, env.Message)
	}
}

// TestHostileLimitsPerProject (10): the same tool in two projects on two
// task queues shares no limit: a step of the second runs while the
// first's worker is gone.
func TestHostileLimitsPerProject(t *testing.T) {
	a, b := projectCopy(t), projectCopy(t)
	qa := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=limits-qa"}
	qb := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=limits-qb"}
	wa := workerAt(t, a, qa...)
	plan := "name: one-lim1\nsteps:\n  - {id: one, capability: test.lim1, timeout: 20s}\n"
	writeIn := func(dir string) string {
		p := filepath.Join(dir, "one-lim1.yaml")
		_ = os.WriteFile(p, []byte(plan), 0o644)
		return p
	}
	if code, env, _ := h.capflowAt(t, a, qa, "run", writeIn(a)); code != 0 {
		t.Fatalf("project A: exit %d %s", code, env.Message)
	}
	h.kill(wa)
	workerAt(t, b, qb...)
	if code, env, _ := h.capflowAt(t, b, qb, "run", writeIn(b)); code != 0 {
		t.Fatalf("project B with project A's worker gone: exit %d %s", code, env.Message)
	}
}

// TestHostileRecordsOutOfReach (12): a tool cannot rewrite what it was
// given or forge its attempts: the console shows the inputs the step got
// and the one failed attempt it made.
func TestHostileRecordsOutOfReach(t *testing.T) {
	base := startConsole(t)
	plan := h.writePlan(t, "forger", "name: forger\nsteps:\n  - {id: f, capability: test.forger, with: {cmd: \"ls /\"}}\n")
	code, r := h.run(t, plan)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	if st := r.step(t, "f"); st.Attempts != 2 {
		t.Fatalf("attempts %d, want 2", st.Attempts)
	}
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(v) != nil {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	var in map[string]any
	get("/api/runs/"+r.WorkflowID+"/steps/f/inputs", &in)
	if in["cmd"] != "ls /" || in["amount"] != nil {
		t.Fatalf("the console's inputs: %v", in)
	}
	var tl struct {
		Steps []struct {
			ID     string            `json:"id"`
			Failed []json.RawMessage `json:"failed_attempts"`
		} `json:"steps"`
	}
	get("/api/runs/"+r.WorkflowID+"/timeline", &tl)
	if len(tl.Steps) != 1 || len(tl.Steps[0].Failed) != 1 || strings.Contains(string(tl.Steps[0].Failed[0]), "forged") {
		t.Fatalf("the timeline's failed attempts: %+v", tl.Steps)
	}
}

// TestHostileServerOutOfRecords (13): a server started by the run can
// write its own folder only: it neither rewrites another step's stored
// output nor links it to a device, and a rerun reuses the real one.
func TestHostileServerOutOfRecords(t *testing.T) {
	plan := h.writePlan(t, "server-records", `name: server-records
steps:
  - {id: p, capability: text.render, with: {template: "${inputs.big}"}}
  - id: srv
    capability: server.start
    needs: [p]
    with:
      name: vandal
      command: [sh, -c, "for f in $(find .capflow/runs -name data.json); do ln -sf /dev/zero $f && echo linked $f; done; echo listening on; exec sleep 300"]
      readiness: {type: log, target: "listening on", timeout: 20s}
  - {id: stop, capability: server.stop, needs: [srv], with: {name: vandal}}
inputs: {big: {type: string}}
`)
	inputs := filepath.Join(t.TempDir(), "inputs.json")
	_ = os.WriteFile(inputs, []byte(`{"big": "`+strings.Repeat("x", 300<<10)+`"}`), 0o644)
	code, r := h.run(t, plan, "--inputs-file", inputs)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	stored := r.step(t, "p").DataFile
	if stored == "" {
		t.Fatal("p's output was not stored by reference")
	}
	if st, err := os.Lstat(stored); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("p's stored output: %v %v", st, err)
	}
	code, env, _ := h.capflow(t, "rerun", r.WorkflowID)
	if code != 0 {
		t.Fatalf("rerun: exit %d %s", code, env.Message)
	}
	var rr runResult
	data(t, env, &rr)
	if st := rr.step(t, "p"); st.ReusedFrom != r.WorkflowID {
		t.Fatalf("p was not reused: %+v", st)
	}
}
