package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/activities"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/runtimekit"
	"github.com/capflow/capflow/internal/wfapi"
)

// The standing hostile suite of "trust by construction" (docs/sandbox.md,
// docs/console.md, docs/mcp.md, docs/artifacts.md, docs/cache.md): each
// test reproduces a finding of the hostile audit against the real binaries
// and a real Temporal server, and fails if it comes back. The unit suites
// hold the rest (activities, internal/{beneath,console,cli,sandbox,cache,
// mcpclient,config,manifest}: TestHostile*, TestKernelSettings...).

// TestHostileNoWorkerSaysSo: `capflow run` to a task queue no worker
// polls says so within 15 s and keeps waiting; Ctrl-C then exits 5
// (CANCELLED), the run left as it is. `capflow status` of that run says at
// once that no worker can answer (it waited 10 s for gRPC's words), and
// `capflow cancel` says so, names the way out with no worker, and on
// Ctrl-C exits 5 with the cancellation standing (it was TOOL_FAILURE,
// exit 1, "ended with an error: context canceled").
func TestHostileNoWorkerSaysSo(t *testing.T) {
	t.Parallel()
	queue := fmt.Sprintf("nobody-%d", time.Now().UnixNano())
	id := "no-worker-" + queue
	defer func() { _ = h.client.TerminateWorkflow(context.Background(), id, "", "test over") }()
	plan := h.writePlan(t, "no-worker", "name: no-worker\nsteps:\n  - {id: a, capability: text.render, with: {template: hi}}\n")
	interruptAfter(t, "no worker polls task queue "+queue+": start capflow-worker --task-queue "+queue, "stopped waiting for "+id,
		"run", plan, "--id", id, "--task-queue", queue)

	start := time.Now()
	code, env, _ := h.capflow(t, "status", id)
	if code != 1 || env.Error == nil || env.Error.Code != "DEPENDENCY_UNAVAILABLE" || !strings.Contains(env.Message, "no worker polls its task queue "+queue) {
		t.Fatalf("status of a run no worker takes: exit %d %s %+v", code, env.Message, env.Error)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("status took %s", took)
	}
	stderr := interruptAfter(t, "no worker polls task queue "+queue, "its cancellation is requested", "cancel", id)
	if !strings.Contains(stderr, "temporal workflow terminate --workflow-id "+id) {
		t.Fatalf("cancel with no worker does not say how to end the run:\n%s", stderr)
	}
}

// interruptAfter runs capflow until its stderr says want (within 20 s,
// said within 15), then sends Ctrl-C: it must exit 5 with a CANCELLED
// envelope whose message holds msg. It returns what stderr said.
func interruptAfter(t *testing.T, want, msg string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), append(args, "--project", h.project, "--output", "json")...)
	cmd.Env = h.env()
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	said, read := make(chan bool, 2), make(chan struct{})
	var all strings.Builder
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), want) {
				select { // once: the reading goes on
				case said <- true:
				default:
				}
			}
		}
		said <- false
	}()
	select {
	case ok := <-said:
		if !ok {
			t.Fatalf("capflow %v ended without saying %q", args, want)
		}
		if took := time.Since(start); took > 15*time.Second {
			t.Fatalf("capflow %v said so after %s", args, took)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("capflow %v: no word within 20 s of a run nobody takes", args)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	<-read // all of stderr, before Wait closes it
	err = cmd.Wait()
	var env envelope.Envelope
	_ = json.Unmarshal(out.Bytes(), &env)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 || env.Error == nil || env.Error.Code != "CANCELLED" || !strings.Contains(env.Message, msg) {
		t.Fatalf("capflow %v, Ctrl-C while waiting: %v, want exit 5, CANCELLED, %q\n%s", args, err, msg, out.String())
	}
	return all.String()
}

// TestHostileEditedRecordStillStopsItsServer: while a run waits, its
// processes.json is rewritten to name another process (the hostile
// audit's M2). The victim is never signalled, and the run's real server
// is still stopped when the run ends: found by its ownership token.
func TestHostileEditedRecordStillStopsItsServer(t *testing.T) {
	victim := exec.Command("sleep", "300")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	plan := h.writePlan(t, "edited-record", fmt.Sprintf(`name: edited-record
failure_policy: continue_all
steps:
  - id: start
    capability: server.start
    with: {name: web, command: [python3, plans/examples/webapp/server.py], port: %s, readiness: {type: log, target: "listening on", timeout: 20s}}
  - {id: gate, capability: flow.approve, needs: [start], with: {prompt: "go on?"}}
  - {id: stop, capability: server.stop, needs: [gate], with: {name: web}}
`, freePortNumber(t)))
	code, env, _ := h.capflow(t, "run", plan, "--detach")
	var started struct {
		WorkflowID string `json:"workflow_id"`
	}
	data(t, env, &started)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, env.Message)
	}
	id := started.WorkflowID
	waitStep(t, id, "gate", "waiting", func(s wfapi.StepState) bool { return s == wfapi.StepWaiting })
	runDir := filepath.Join(h.project, ".capflow", "runs", activities.RunFolderName(id))
	reg, err := runtimekit.ReadRegistry(runDir)
	if err != nil || len(reg.Processes) != 1 || !pidAlive(reg.Processes[0].PID) {
		t.Fatalf("the run's server: %+v %v", reg, err)
	}
	real := reg.Processes[0].PID
	forged := reg.Processes[0]
	forged.PID, forged.PGID = victim.Process.Pid, victim.Process.Pid
	reg.Processes[0] = forged
	b, _ := json.Marshal(reg)
	if err := os.WriteFile(filepath.Join(runDir, runtimekit.ProcessesFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, env, _ := h.capflow(t, "approve", id, "gate"); code != 0 {
		t.Fatalf("approve: exit %d %s", code, env.Message)
	}
	h.capflow(t, "status", id, "--follow")
	if !pidAlive(victim.Process.Pid) {
		t.Fatal("the process the edited record named was signalled")
	}
	for deadline := time.Now().Add(10 * time.Second); pidAlive(real); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run ended and its real server (pid %d) still runs", real)
		}
	}
}

// TestHostileCronThatNeverFires: a schedule whose cron no date matches is
// refused, not kept silently (L12).
func TestHostileCronThatNeverFires(t *testing.T) {
	plan := h.writePlan(t, "never", "name: never\nsteps:\n  - {id: a, capability: text.render, with: {template: hi}}\n")
	code, env, _ := h.capflow(t, "schedule", "create", "never-fires", plan, "--cron", "0 0 31 2 *")
	if code != 2 || !strings.Contains(env.Message, "never fires") {
		t.Fatalf("exit %d: %s", code, env.Message)
	}
	if _, env, _ := h.capflow(t, "schedule", "list"); strings.Contains(fmt.Sprint(env.Data), "never-fires") {
		t.Fatalf("the schedule was kept: %v", env.Data)
	}
}

// TestHostileConsoleCannotBeDrivenFromOutside: a run waits at a gate; a
// cross-site text/plain POST (the hostile audit's H5, as a page would send
// it), a rebinding Host and a plan's http.request each fail to approve it
// (403), and the gate is still waiting for a person.
func TestHostileConsoleCannotBeDrivenFromOutside(t *testing.T) {
	base := startConsole(t)
	gated := startDetached(t, h.writePlan(t, "hostile-gate", "name: hostile-gate\nsteps:\n  - {id: gate, capability: flow.approve, with: {prompt: ship?}}\n"))
	waitStep(t, gated, "gate", "waiting", func(s wfapi.StepState) bool { return s == wfapi.StepWaiting })
	post := func(host string, header ...string) int {
		req, _ := http.NewRequest("POST", base+"/api/runs/"+gated+"/decide", strings.NewReader(`{"step":"gate","action":"approve","by":"alice"}`))
		if host != "" {
			req.Host = host
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	port := base[strings.LastIndex(base, ":")+1:]
	for name, code := range map[string]int{
		"a cross-site text/plain POST": post("", "Origin", "http://evil.example", "Content-Type", "text/plain"),
		"a rebinding Host":             post("evil.example:"+port, "Content-Type", "application/json"),
		"JSON without the CSRF token":  post("", "Content-Type", "application/json"),
	} {
		if code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
	// A plan's step, with every header it likes: the console is on this
	// machine's loopback, which the run does not reach (hostile findings
	// at 6003afe, 1); allowed there by the policy, the console itself
	// refuses the request a plan's step sends.
	attack := h.writePlan(t, "hostile-ssrf", fmt.Sprintf(`name: hostile-ssrf
steps:
  - id: approve
    capability: http.request
    with:
      url: %s/api/runs/%s/decide
      method: POST
      json: {step: gate, action: approve, by: ssrf-plan}
      headers: {X-Capflow-Csrf: guessed, Origin: %s}
`, base, gated, base))
	code, r := h.run(t, attack)
	st := r.step(t, "approve")
	if code != 1 || st.Envelope == nil || st.Envelope.Error == nil || st.Envelope.Error.Code != "POLICY_BLOCKED" || !strings.Contains(st.Envelope.Message, "a loopback address") {
		t.Fatalf("the plan's request to loopback: exit %d, %+v", code, st.Envelope)
	}
	allowNetwork(t, h.project, strings.TrimPrefix(base, "http://"))
	code, r = h.run(t, attack)
	st = r.step(t, "approve")
	if d, _ := st.Envelope.Data.(map[string]any); code != 1 || fmt.Sprint(d["status"]) != "403" || !strings.Contains(fmt.Sprint(d["body"]), "a plan's step may not drive the console") {
		t.Fatalf("the plan's request, allowed to reach the console: exit %d, %+v", code, st.Envelope)
	}
	waitStep(t, gated, "gate", "still waiting", func(s wfapi.StepState) bool { return s == wfapi.StepWaiting })
	if code, env, _ := h.capflow(t, "cancel", gated); code != 5 {
		t.Fatalf("cancel: %d %s", code, env.Message)
	}
}

// TestHostileOutputPathOutsideTheStep: a confined tool names a file
// outside its step folder (the hostile audit's H1: the ownership key, an
// SSH key) as its cached output: the step fails INVALID_INPUT naming the
// field, and nothing of the file reaches the project's store.
func TestHostileOutputPathOutsideTheStep(t *testing.T) {
	tool := filepath.Join(h.project, "tools", "leak")
	if err := os.MkdirAll(tool, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tool)
	os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte(`name: leak
version: 1.0.0
description: names any file as its output
capabilities: [test.leak]
input_schema: {type: object, properties: {target: {type: string}}}
output_schema: {type: object, properties: {file: {type: string, format: path}}}
entrypoint: {type: command, command: [./run.sh]}
idempotent: true
`), 0o644)
	os.WriteFile(filepath.Join(tool, "run.sh"), []byte(`#!/bin/sh
t=$(sed -n 's/.*"target":"\([^"]*\)".*/\1/p' "$CAPFLOW_INPUT_PATH")
case "$t" in link:*) ln -s "${t#link:}" "$CAPFLOW_WORKDIR/innocent.txt"; t="$CAPFLOW_WORKDIR/innocent.txt";; esac
printf '{"toolId":"leak","exitCode":0,"success":true,"timestamp":"2026-01-01T00:00:00Z","message":"ok","feedback":[],"data":{"file":"%s"}}' "$t" > "$CAPFLOW_OUTPUT_PATH"
`), 0o755)
	secret := filepath.Join(h.tmp, "hostile-secret.txt")
	os.WriteFile(secret, []byte("HOSTILE-SECRET-OUTSIDE-THE-PROJECT"), 0o600)
	plan := h.writePlan(t, "hostile-leak", fmt.Sprintf(`name: hostile-leak
failure_policy: continue_all
steps:
  - {id: abs, capability: test.leak, cache: true, with: {target: %q}}
  - {id: link, capability: test.leak, cache: true, with: {target: %q}}
`, secret, "link:"+secret))
	code, r := h.run(t, plan)
	for _, id := range []string{"abs", "link"} {
		st := r.step(t, id)
		if code != 1 || st.Status != "failed" || st.Envelope.Error == nil || st.Envelope.Error.Code != "INVALID_INPUT" || !strings.Contains(st.Envelope.Message, "output /file") {
			t.Fatalf("step %s: exit %d %s %+v", id, code, st.Status, st.Envelope)
		}
	}
	_ = filepath.WalkDir(filepath.Join(h.project, ".capflow"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "HOSTILE-SECRET-OUTSIDE") {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})
}

// TestHostileDeadWorkerStepMovesOn: a command tool that declares no
// heartbeat, its worker SIGKILLed mid-step: the step is retried by another
// worker about a minute later (its default heartbeat timeout), not at
// its 10-minute start-to-close.
func TestHostileDeadWorkerStepMovesOn(t *testing.T) {
	t.Parallel()
	w := newOwnWorker(t, "dead-worker")
	log := h.freshLog("dead-worker.log")
	id := w.detach(h.writePlan(t, "dead-worker", `name: dead-worker
steps:
  - {id: long, capability: test.slow, with: {seconds: 5, log: "`+log+`"}}
`))
	waitLine(t, log, "attempt 1 long")
	w.kill()
	killed := time.Now()
	w.start()
	res := waitResult(t, id, 3*time.Minute)
	if took := time.Since(killed); res.Status != "passed" || took > 100*time.Second {
		t.Fatalf("after its worker was killed: %s %s, %s later", res.Status, res.Message, took.Round(time.Second))
	}
}
