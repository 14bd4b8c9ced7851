package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/syncbuf"
)

// statusBound is the contract's 3 s for status, with margin for a loaded
// 2-core machine (the CLI's own start, Describe and the pollers check).
const statusBound = 6 * time.Second

// timedStatus runs capflow status for a run of project dir and says how
// long it took.
func timedStatus(t *testing.T, dir string, env []string, id string) (int, runResult, []string, time.Duration) {
	t.Helper()
	began := time.Now()
	code, e, stderr := h.capflowAt(t, dir, env, "status", id)
	took := time.Since(began)
	var r runResult
	data(t, e, &r)
	if r.Status == "" {
		t.Fatalf("status %s: exit %d %s\n%s", id, code, e.Message, stderr)
	}
	var lines []string
	for _, f := range e.Feedback {
		if f.Phase == "attempt" {
			lines = append(lines, f.Message)
		}
	}
	r.Message = e.Message + " | " + r.Message
	return code, r, lines, took
}

// The failure path, as an operator meets it (issue 54): status answers
// within its bound while a local step holds the run's workflow task, and
// says so; a step whose worker was SIGKILLed says where its attempt is,
// that the worker may be gone and when the step is retried; a new worker
// takes the step up, and its attempts count both.
func TestStatusOnTheFailurePath(t *testing.T) {
	t.Parallel()
	dir := projectCopy(t)
	env := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=capflow-failure-path"}
	own := workerAt(t, dir, env...)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// A local step of 8 s holds the run's workflow task, and a query with it.
	local := startDetachedAt(t, dir, env, write("held.yaml", "name: held\nsteps:\n  - {id: hold, capability: test.slow_local, with: {seconds: 8}, timeout: 30s}\n"))
	time.Sleep(2 * time.Second)
	code, r, _, took := timedStatus(t, dir, env, local)
	if code != 0 || r.Status != "running" || !strings.Contains(r.Message, "a worker holds the run's workflow task") || took > statusBound {
		t.Fatalf("status while a local step holds the task: exit %d %s %q in %s", code, r.Status, r.Message, took)
	}

	// A regular step whose worker is SIGKILLed.
	killed := startDetachedAt(t, dir, env, write("orphan.yaml", "name: orphan\nsteps:\n  - {id: long, capability: test.slow, with: {seconds: 8}, heartbeat: 16s, timeout: 2m}\n"))
	for i := 0; ; i++ {
		_, r, lines, _ := timedStatus(t, dir, env, killed)
		if len(lines) > 0 && strings.Contains(lines[0], "long: attempt 1 of 3 on worker") {
			break
		}
		if i > 30 {
			t.Fatalf("the step never ran: %s %q", r.Status, lines)
		}
		time.Sleep(500 * time.Millisecond)
	}
	h.kill(own)
	// One following the run (its output piped) is told too: the run's
	// progress query gets no answer, the server's view still does.
	follow := exec.Command(filepath.Join(h.bin, "capflow"), "status", killed, "--follow", "--project", dir)
	follow.Env = append(h.env(), env...)
	var followed syncbuf.Buffer
	follow.Stderr = &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = follow.Process.Kill(); _ = follow.Wait() }()
	time.Sleep(12 * time.Second) // past client.Overdue (10 s) without a heartbeat
	code, r, lines, took := timedStatus(t, dir, env, killed)
	if code != 0 || took > statusBound || len(lines) != 1 || !strings.Contains(lines[0], "may be gone); the step is retried when its heartbeat timeout (16 s) passes, in ") ||
		r.step(t, "long").Attempts != 1 {
		t.Fatalf("status with its worker gone: exit %d in %s: %q, %+v", code, took, lines, r.Steps)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(followed.String(), "⚠ long: attempt 1 of 3"); {
		if time.Now().After(deadline) {
			t.Fatalf("status --follow did not say the worker may be gone:\n%s", followed.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(followed.String(), "may be gone") {
		t.Fatalf("status --follow:\n%s", followed.String())
	}
	workerAt(t, dir, env...)
	res := waitResult(t, killed, 2*time.Minute)
	if s := stepOf(&res, "long"); res.Status != "passed" || s.Attempts != 2 {
		t.Fatalf("after a new worker: %s, long %+v", res.Status, s)
	}
}

// A step refused for its input is told where that input came from, with
// the command that can help: none for a run input (a rerun replays it and
// fails the same way, as a trial found), a rerun from the step that made
// it for an earlier step's output.
func TestARefusedInputsNextNamesItsSource(t *testing.T) {
	p := h.writePlan(t, "refused-input", `name: refused-input
inputs: {file: {type: string}}
steps:
  - {id: read, capability: file.read, with: {path: "${inputs.file}"}}
`)
	code, r := h.run(t, p, "--input", "file=e2e-plans/nope.md")
	want := "the message names the input; it comes from the run's input \"file\": capflow run PLAN --input file=VALUE with a value that fits (a rerun replays the inputs it was given)"
	if code != 1 || len(r.Next) != 1 || r.Next[0].Code != "INVALID_INPUT" || r.Next[0].Command != "" || r.Next[0].Advice != want {
		t.Fatalf("a run input: exit %d %+v", code, r.Next)
	}
	p = h.writePlan(t, "refused-output", `name: refused-output
steps:
  - {id: name, capability: text.render, with: {template: e2e-plans/nope.md}}
  - {id: read, capability: file.read, with: {path: "${steps.name.data.text}"}}
`)
	code, r = h.run(t, p)
	want = "the message names the input; it comes from step name's output: where that step's with is at fault, fix it in the plan and capflow run PLAN again (a rerun replays the plan); where its tool is, fix the tool and the command above runs it again"
	if code != 1 || len(r.Next) != 1 || r.Next[0].Command != "capflow rerun "+r.WorkflowID+" --from name" || r.Next[0].Advice != want {
		t.Fatalf("an earlier step's output: exit %d %+v", code, r.Next)
	}
}
