package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A dev server that restarts keeps nothing, capflow's search attributes
// included: a worker that outlives it registers them again, so the next
// run passes instead of failing its every workflow task until the worker
// restarts (new-user trial of issue 54).
func TestWorkerOutlivesADevServerRestart(t *testing.T) {
	t.Parallel()
	dir := projectCopy(t)
	addr := freePort()
	var server *exec.Cmd
	start := func() {
		server = exec.Command(h.temporalBin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strings.Split(addr, ":")[1], "--log-level", "error")
		if err := server.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; exec.Command(h.temporalBin, "operator", "cluster", "health", "--address", addr).Run() != nil; i++ {
			if i > 100 {
				t.Fatal("the dev server did not start")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	stop := func() { _ = server.Process.Kill(); _ = server.Wait() }
	start()
	t.Cleanup(stop)
	env := []string{"CAPFLOW_TEMPORAL_ADDRESS=" + addr, "CAPFLOW_TEMPORAL_TASK_QUEUE=capflow-dev-restart"}
	workerAt(t, dir, env...)
	plan := filepath.Join(dir, "after-restart.yaml")
	if err := os.WriteFile(plan, []byte("name: after-restart\nsteps:\n  - {id: a, capability: test.noop}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop()
	start()                      // in memory: nothing of before, no search attribute
	time.Sleep(16 * time.Second) // the worker checks every 15 s
	id := startDetachedAt(t, dir, env, plan)
	var r runResult
	for i := 0; ; i++ {
		_, e, _ := h.capflowAt(t, dir, env, "status", id)
		data(t, e, &r)
		if r.Status == "passed" {
			return
		}
		if i > 45 {
			t.Fatalf("after the restart the run is %s (%s): its workflow tasks fail on the search attributes the server lost", r.Status, e.Message)
		}
		time.Sleep(time.Second)
	}
}
