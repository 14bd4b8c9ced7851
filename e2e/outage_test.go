package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/wfapi"
)

// outageServer is a Temporal server the test may SIGKILL and start again:
// make cluster-test's (through scripts/cluster.sh), else a dev server of
// its own on a database file in dir.
func outageServer(t *testing.T, dir string) (addr string, kill, start func()) {
	if onCluster() {
		return h.address, func() { h.cluster(t, "kill", "server") }, func() { h.cluster(t, "start", "server") }
	}
	addr = freePort()
	var server *exec.Cmd
	start = func() {
		t.Helper()
		server = exec.Command(h.temporalBin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strings.Split(addr, ":")[1],
			"--db-filename", filepath.Join(dir, "outage.db"), "--log-level", "error",
			"--search-attribute", "CapflowPlan=Keyword", "--search-attribute", "CapflowStatus=Keyword")
		if err := server.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			if exec.Command(h.temporalBin, "operator", "cluster", "health", "--address", addr).Run() == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatal("the dev server did not start")
	}
	kill = func() { _ = server.Process.Kill(); _ = server.Wait() }
	start()
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	return addr, kill, start
}

// A Temporal server that is SIGKILLed while a step runs and comes back 6 s
// later loses nothing: the tool, which is not idempotent, keeps running
// (its heartbeats fail meanwhile; the SDK alone would cancel it within
// seconds), the step succeeds in its first attempt, and the tool ran once.
func TestAServerRestartDoesNotStopARunningTool(t *testing.T) {
	dir := projectCopy(t)
	tool := filepath.Join(dir, "tools", "slow-once")
	_ = os.MkdirAll(tool, 0o755)
	_ = os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte(`name: slow-once
version: 1.0.0
description: Sleeps, not idempotent
capabilities: [test.slow_once]
input_schema: {type: object, required: [seconds], properties: {seconds: {type: integer}, log: {type: string}}}
entrypoint: {type: command, command: [./run.sh]}
idempotent: false
timeouts: {start_to_close: 5m, heartbeat: 30s}
sandbox: {write: [logs]}
`), 0o644)
	_ = os.WriteFile(filepath.Join(tool, "run.sh"), []byte("#!/bin/sh\nexec \"$(dirname \"$0\")/../slow/run.sh\"\n"), 0o755)
	addr, kill, start := outageServer(t, dir)
	env := []string{"CAPFLOW_TEMPORAL_ADDRESS=" + addr, "CAPFLOW_TEMPORAL_TASK_QUEUE=capflow-outage"}
	workerAt(t, dir, env...)
	log := filepath.Join(dir, "logs", "outage.log")
	_ = os.MkdirAll(filepath.Dir(log), 0o755)
	plan := filepath.Join(dir, "outage.yaml")
	_ = os.WriteFile(plan, []byte(fmt.Sprintf("name: outage\nsteps:\n  - {id: s, capability: test.slow_once, with: {seconds: 16, log: %q}}\n", log)), 0o644)
	id := startDetachedAt(t, dir, env, plan)
	for i := 0; ; i++ {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), "attempt 1") {
			break
		}
		if i > 300 {
			t.Fatal("the step did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	kill()
	time.Sleep(6 * time.Second)
	start()
	code, e, stderr := h.capflowAt(t, dir, env, "status", id, "--follow")
	var r runResult
	data(t, e, &r)
	b, _ := os.ReadFile(log)
	if st := r.step(t, "s"); code != 0 || r.Status != "passed" || st.Attempts != 1 || strings.Count(string(b), "attempt") != 1 || !strings.Contains(string(b), "finished 1") {
		t.Fatalf("after a server restart: exit %d %s (%s), attempts %d, the tool's log:\n%s\n%s", code, r.Status, r.Message, st.Attempts, b, stderr)
	}
	if !strings.Contains(h.workerLog(), "a heartbeat did not reach the Temporal server: the tool keeps running") {
		t.Fatal("the worker did not say it rode out the outage")
	}
}

// PostgreSQL restarted under a running plan: the run ends as it would
// have, each step ran once, and `capflow runs` lists it (visibility on
// PostgreSQL). make cluster-test runs it; the dev server has no PostgreSQL.
func TestClusterPostgresRestart(t *testing.T) {
	if !onCluster() {
		t.Skip("needs make cluster-test's PostgreSQL (this run uses the dev server)")
	}
	log := h.freshLog("pg-restart.log")
	id := startDetached(t, h.writePlan(t, "pg-restart", `name: pg-restart
steps:
  - {id: a, capability: test.slow, with: {seconds: 4, log: "`+log+`"}}
  - {id: b, capability: test.slow, with: {seconds: 2, log: "`+log+`"}, needs: [a]}
`))
	waitStepRunning(t, id, "a")
	h.cluster(t, "stop", "postgres")
	time.Sleep(3 * time.Second)
	h.cluster(t, "start", "postgres")
	res := waitResult(t, id, 3*time.Minute)
	if res.Status != wfapi.StatusPassed {
		t.Fatalf("after a PostgreSQL restart: %s %s", res.Status, res.Message)
	}
	l := readAttemptLog(t, log)
	for _, step := range []string{"a", "b"} {
		if starts, after := l.startsAfterFinish(step); starts != 1 || after != 0 {
			t.Fatalf("%s: %d starts, %d after finishing", step, starts, after)
		}
	}
	for i := 0; ; i++ {
		_, e, _ := h.capflow(t, "runs", "--plan", "pg-restart")
		if strings.Contains(fmt.Sprint(e.Data), id) {
			break
		}
		if i == 50 {
			t.Fatalf("capflow runs does not list %s: %v", id, e.Data)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
