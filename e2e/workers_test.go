package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/envelope"
)

// The tests' workers: the shared project's (startWorker, killWorker), and
// workers of a test's own (workerAt, ownWorker), which let it run beside
// the others (t.Parallel).

// startWorker starts the shared project's worker with the harness's
// environment, and waits until it polls.
func (h *harness) startWorker() error {
	w, err := h.spawn(h.project)
	if err == nil {
		h.mu.Lock()
		h.main = w
		h.mu.Unlock()
	}
	return err
}

// spawn starts a worker serving the project at dir, its output in a log
// of its own (tests running side by side each wait for their worker), and
// returns it once it polls.
func (h *harness) spawn(dir string, extra ...string) (*exec.Cmd, error) {
	h.mu.Lock()
	h.started++
	log := filepath.Join(h.tmp, fmt.Sprintf("worker-%03d.log", h.started))
	h.mu.Unlock()
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(h.bin, "capflow-worker"), "--project", dir)
	cmd.Env = append(h.env(), extra...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.workers = append(h.workers, cmd)
	h.mu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if b, _ := os.ReadFile(log); bytes.Contains(b, []byte("worker started")) {
			return cmd, nil
		}
	}
	b, _ := os.ReadFile(log)
	return cmd, fmt.Errorf("worker did not start; log:\n%s", b)
}

// workerLog is every worker's log, in the order they started.
func (h *harness) workerLog() string {
	files, _ := filepath.Glob(filepath.Join(h.tmp, "worker-*.log"))
	var all []byte
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all = append(all, b...)
	}
	return string(all)
}

// killWorker SIGKILLs the shared project's worker (startWorker's).
func (h *harness) killWorker() {
	h.mu.Lock()
	w := h.main
	h.mu.Unlock()
	h.kill(w)
}

// kill SIGKILLs a worker and forgets it (a worker already killed is left
// alone).
func (h *harness) kill(w *exec.Cmd) {
	h.mu.Lock()
	i := slices.Index(h.workers, w)
	if i >= 0 {
		h.workers = slices.Delete(h.workers, i, i+1)
	}
	h.mu.Unlock()
	if i >= 0 {
		_ = w.Process.Kill()
		_ = w.Wait()
	}
}

// workerAt starts a worker in dir with extra variables, stopped when the
// test ends (or when the test kills it).
func workerAt(t testing.TB, dir string, env ...string) *exec.Cmd {
	t.Helper()
	w, err := h.spawn(dir, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.kill(w) })
	return w
}

// ownWorker is a worker of the shared project on a task queue of its own:
// a test that kills and restarts it runs beside others (t.Parallel), whose
// runs go to their own workers.
type ownWorker struct {
	t   *testing.T
	dir string   // its project
	env []string // the queue, for the worker and the CLI alike
	cmd *exec.Cmd
}

func newOwnWorker(t *testing.T, name string) *ownWorker {
	t.Helper()
	return newOwnWorkerAt(t, name, h.project)
}

// newOwnWorkerAt is an own worker of the project in dir (a projectCopy).
func newOwnWorkerAt(t *testing.T, name, dir string) *ownWorker {
	t.Helper()
	w := &ownWorker{t: t, dir: dir, env: []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=capflow-" + name}}
	w.start()
	return w
}

func (w *ownWorker) start()   { w.t.Helper(); w.cmd = workerAt(w.t, w.dir, w.env...) }
func (w *ownWorker) kill()    { h.kill(w.cmd) }
func (w *ownWorker) restart() { w.t.Helper(); w.kill(); w.start() }

// detach starts plan on the worker's queue and returns the run's ID.
func (w *ownWorker) detach(plan string) string {
	w.t.Helper()
	return startDetachedAt(w.t, w.dir, w.env, plan)
}

// run runs plan on the worker's queue to its end (h.run's).
func (w *ownWorker) run(plan string, args ...string) (int, runResult) {
	w.t.Helper()
	code, env, stderr := w.capflow(append([]string{"run", plan}, args...)...)
	var r runResult
	data(w.t, env, &r)
	if r.Status == "" {
		w.t.Fatalf("no status (exit %d): %s\n%s", code, env.Message, stderr)
	}
	return code, r
}

// capflow runs the CLI on the worker's queue.
func (w *ownWorker) capflow(args ...string) (int, envelope.Envelope, string) {
	w.t.Helper()
	return h.capflowAt(w.t, w.dir, w.env, args...)
}
