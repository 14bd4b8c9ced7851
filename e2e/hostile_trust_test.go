package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/activities"
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
// (CANCELLED), the run left as it is.
func TestHostileNoWorkerSaysSo(t *testing.T) {
	queue := fmt.Sprintf("nobody-%d", time.Now().UnixNano())
	plan := h.writePlan(t, "no-worker", "name: no-worker\nsteps:\n  - {id: a, capability: text.render, with: {template: hi}}\n")
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), "run", plan, "--task-queue", queue, "--project", h.project, "--output", "json")
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
	said := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var all strings.Builder
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "no worker polls task queue "+queue) {
				said <- sc.Text()
			}
		}
		said <- "ended without a word:\n" + all.String()
	}()
	select {
	case line := <-said:
		if !strings.Contains(line, "capflow-worker --task-queue "+queue) {
			t.Fatalf("%s", line)
		}
		if took := time.Since(start); took > 15*time.Second {
			t.Fatalf("said so after %s", took)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no word within 20 s of a run nobody takes")
	}
	_ = cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 5 {
		t.Fatalf("Ctrl-C while waiting: %v, want exit 5\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), `"code": "CANCELLED"`) && !strings.Contains(out.String(), `"code":"CANCELLED"`) {
		t.Fatalf("envelope: %s", out.String())
	}
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
	plan := h.writePlan(t, "edited-record", `name: edited-record
failure_policy: continue_all
steps:
  - id: start
    capability: server.start
    with: {name: web, command: [python3, plans/examples/webapp/server.py], port: 18779, readiness: {type: log, target: "listening on", timeout: 20s}}
  - {id: gate, capability: flow.approve, needs: [start], with: {prompt: "go on?"}}
  - {id: stop, capability: server.stop, needs: [gate], with: {name: web}}
`)
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
