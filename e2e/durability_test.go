package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// startDetached starts a plan without waiting and returns its workflow ID.
func startDetached(t *testing.T, plan string, args ...string) string {
	t.Helper()
	return startDetachedAt(t, h.project, nil, plan, args...)
}

// startDetachedAt is startDetached in another project, with variables.
func startDetachedAt(t *testing.T, project string, extra []string, plan string, args ...string) string {
	t.Helper()
	code, env, stderr := h.capflowAt(t, project, extra, append([]string{"run", plan, "--detach"}, args...)...)
	var started map[string]any
	data(t, env, &started)
	id, _ := started["workflow_id"].(string)
	if code != 0 || id == "" {
		t.Fatalf("detach: exit %d %s\n%s", code, env.Message, stderr)
	}
	return id
}

func waitResult(t *testing.T, id string, within time.Duration) wfapi.Result {
	t.Helper()
	var res wfapi.Result
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := h.client.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return res
}

// attemptLog reads the slow tool's log: "attempt N step" when an attempt
// starts, "finished N step" when it ends.
type attemptLog struct{ lines [][]string }

func readAttemptLog(t *testing.T, path string) attemptLog {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l attemptLog
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		l.lines = append(l.lines, strings.Fields(line))
	}
	return l
}

// startsAfterFinish counts attempts of a step that began after one of its
// attempts had finished: a finished step run again.
func (l attemptLog) startsAfterFinish(step string) (starts, after int) {
	finished := false
	for _, f := range l.lines {
		if len(f) != 3 || f[2] != step {
			continue
		}
		switch f[0] {
		case "attempt":
			starts++
			if finished {
				after++
			}
		case "finished":
			finished = true
		}
	}
	return
}

// One run survives five SIGKILLs of its worker, each in the middle of a
// step: every step completes, and no step that finished is ever run again.
func TestRunSurvivesFiveWorkerKills(t *testing.T) {
	t.Parallel()
	w := newOwnWorker(t, "five-kills")
	log := h.freshLog("five-kills.log")
	var b strings.Builder
	b.WriteString("name: five-kills\nsteps:\n")
	for i := 1; i <= 6; i++ {
		needs := ""
		if i > 1 {
			needs = fmt.Sprintf(", needs: [s%d]", i-1)
		}
		fmt.Fprintf(&b, "  - {id: s%d, capability: test.slow, heartbeat: 2s, with: {seconds: 2, log: %q}%s}\n", i, log, needs)
	}
	id := w.detach(h.writePlan(t, "five-kills", b.String()))
	for k := 1; k <= 5; k++ {
		waitStepRunning(t, id, fmt.Sprintf("s%d", k))
		time.Sleep(700 * time.Millisecond)
		w.restart()
	}
	res := waitResult(t, id, 3*time.Minute)
	if res.Status != wfapi.StatusPassed {
		t.Fatalf("after five kills: %s %s", res.Status, res.Message)
	}
	l := readAttemptLog(t, log)
	for i := 1; i <= 6; i++ {
		step := fmt.Sprintf("s%d", i)
		starts, after := l.startsAfterFinish(step)
		if after != 0 || starts == 0 {
			t.Errorf("%s: %d starts, %d after it had finished (a finished step must never run again)", step, starts, after)
		}
	}
}

// A tool that is not idempotent is never started twice: when its worker
// dies mid-step the step fails (the heartbeat times out) instead of being
// retried on another worker.
func TestNonIdempotentToolNeverStartsTwice(t *testing.T) {
	log := h.freshLog("once.log")
	id := startDetached(t, h.writePlan(t, "once", `name: once
steps:
  - {id: charge, capability: test.once, heartbeat: 2s, retry: {max_attempts: 1}, with: {seconds: 4, log: "`+log+`"}}
`))
	waitStepRunning(t, id, "charge")
	// Killed once the tool has surely started (it logs its start first).
	for i := 0; i < 200 && !fileExists(log); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	h.killWorker()
	if err := h.startWorker(); err != nil {
		t.Fatal(err)
	}
	res := waitResult(t, id, 2*time.Minute)
	l := readAttemptLog(t, log)
	starts, _ := l.startsAfterFinish("charge")
	if starts != 1 {
		t.Fatalf("the non-idempotent tool started %d times", starts)
	}
	s := res.Steps[0]
	if res.Status != wfapi.StatusFailed || s.Status != wfapi.StepFailed || caperr.Code(s.Envelope.Error.Code) != caperr.TaskTimeout {
		t.Fatalf("want the step failed with TASK_TIMEOUT, got %s / %s %+v", res.Status, s.Status, s.Envelope)
	}
}

// The server stops under a running step and stays away past the step's
// end, longer than the SDK tries to report that end (10 s), then comes
// back on the same database: the run completes, and the step that ended
// meanwhile is neither lost nor run again (its end waited for the server;
// the heartbeat timeout would have re-run it a minute later: CI saw it
// when a cluster's server came back slowly).
func TestServerRestartMidRun(t *testing.T) {
	log := h.freshLog("restart.log")
	id := startDetached(t, h.writePlan(t, "restart", `name: restart
steps:
  - {id: before, capability: test.slow, with: {seconds: 4, log: "`+log+`"}}
  - {id: after, capability: test.slow, with: {seconds: 1, log: "`+log+`"}, needs: [before]}
`))
	waitLine(t, log, "attempt 1 before")
	held := strings.Count(h.workerLog(), "a step's end reported")
	h.stopServer(t)
	waitLine(t, log, "finished 1 before")
	time.Sleep(11 * time.Second)
	h.restartServer(t)
	res := waitResult(t, id, 2*time.Minute)
	if res.Status != wfapi.StatusPassed {
		t.Fatalf("after a server restart: %s %s", res.Status, res.Message)
	}
	l := readAttemptLog(t, log)
	for _, step := range []string{"before", "after"} {
		if starts, after := l.startsAfterFinish(step); starts != 1 || after != 0 {
			b, _ := os.ReadFile(log)
			t.Fatalf("%s: %d starts, %d after finishing; the tools' log:\n%s", step, starts, after, b)
		}
	}
	if strings.Count(h.workerLog(), "a step's end reported") != held+1 {
		t.Fatal("the worker did not say it held the step's end for the server")
	}
}

// stopServer stops the run's Temporal server: make cluster-test's, or the
// dev server on its database.
func (h *harness) stopServer(t *testing.T) {
	t.Helper()
	if onCluster() {
		h.cluster(t, "stop", "server")
	} else if err := h.server.Stop(); err != nil {
		t.Fatalf("stop the dev server: %v", err)
	}
}

// restartServer starts it again, on the same database.
func (h *harness) restartServer(t *testing.T) {
	t.Helper()
	if onCluster() {
		h.cluster(t, "start", "server")
	} else if err := h.startServer(); err != nil {
		b, _ := os.ReadFile(h.serverLog.Name())
		t.Fatalf("restart the dev server: %v\n%s", err, b)
	}
}

// A run whose step's worker died is cancelled promptly: the restarted
// worker never had the step, no heartbeat timeout lets the server notice
// (a step of at most a minute gets no default one), and its start-to-close
// would hold the run. The step gets CancelGrace to confirm, then is
// cancelled without its worker.
func TestCancelAfterTheWorkerDied(t *testing.T) {
	t.Parallel()
	w := newOwnWorker(t, "cancel-dead-worker")
	id := w.detach(h.writePlan(t, "cancel-dead-worker", `name: cancel-dead-worker
steps:
  - {id: hanging, capability: test.hang, timeout: 1m}
`))
	// Running in the run's state means scheduled: the worker must have
	// started the tool (its marker) before it dies, or the restarted
	// worker takes the task and confirms the cancellation itself.
	waitStepRunning(t, id, "hanging")
	waitFile(t, filepath.Join(h.project, ".capflow/runs", id, "steps/hanging/marker"))
	w.restart()
	start := time.Now()
	code, env, stderr := w.capflow("cancel", id)
	var r runResult
	data(t, env, &r)
	if code != 5 || r.Status != "cancelled" || time.Since(start) > 55*time.Second {
		t.Fatalf("exit %d after %s: %s %s\n%s", code, time.Since(start), r.Status, env.Message, stderr)
	}
	if s := r.step(t, "hanging"); s.Status != "cancelled" || s.Envelope == nil || !strings.Contains(s.Envelope.Message, "did not confirm the cancellation within 30s") {
		t.Fatalf("hanging: %s %+v", s.Status, s.Envelope)
	}
	recordHistory(t, id, "cancel-grace")
}

// waitLine waits until a file (a test tool's log) has a line.
func waitLine(t *testing.T, path, line string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && slices.Contains(strings.Split(string(b), "\n"), line) {
			return
		}
	}
	t.Fatalf("%s never said %q", path, line)
}

// waitFile waits (at most a minute) until a file exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}
