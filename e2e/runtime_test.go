package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/runtimekit"
)

// pidAlive: the process exists and is not a zombie.
func pidAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	return !strings.HasPrefix(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0], "Z")
}

// The shipped example on the real server with real Chromium: the demo app
// is validated, the report shows what the browser saw and the log issue,
// and no process is left behind.
func TestValidateWebapp(t *testing.T) {
	code, r := h.run(t, filepath.Join(h.project, "plans/examples/validate-webapp.yaml"), "--input", "port="+freePortNumber(t))
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	browse := r.step(t, "browse").Envelope.Data.(map[string]any)
	if s := browse["summary"].(map[string]any); s["passed"] != float64(5) || s["failed"] != float64(0) {
		t.Fatalf("scenario summary %v", s)
	}
	shots, _ := browse["screenshots"].([]any)
	if len(shots) < 5 {
		t.Fatalf("screenshots %v", shots)
	}
	for _, p := range shots {
		if st, err := os.Stat(p.(string)); err != nil || st.Size() < 1000 {
			t.Fatalf("screenshot %v: %v", p, err)
		}
	}
	// The browser's profile was the step's, and went with the browser.
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(shots[0].(string))), ".browser-profile-*")); len(left) != 0 {
		t.Fatalf("the browser's profile stayed: %v", left)
	}
	console, _ := os.ReadFile(browse["console_path"].(string))
	if !strings.Contains(string(console), "button clicked") {
		t.Fatalf("console.json lacks the page's log: %s", console)
	}
	network, _ := os.ReadFile(browse["network_path"].(string))
	if !strings.Contains(string(network), "favicon.ico") {
		t.Fatalf("network.json lacks the failed favicon request: %s", network)
	}
	runDir := filepath.Dir(r.Report.JSON)
	final, err := os.ReadFile(filepath.Join(runDir, "final.md"))
	if err != nil || !strings.Contains(string(final), "ERROR not found: /favicon.ico") || !strings.Contains(string(final), "after-click.png") {
		t.Fatalf("final.md: %v\n%s", err, final)
	}
	reg, err := runtimekit.ReadRegistry(runDir)
	if err != nil || len(reg.Processes) != 1 || reg.Processes[0].StoppedAt == "" || pidAlive(reg.Processes[0].PID) {
		t.Fatalf("processes: %+v (%v)", reg, err)
	}
}

const failingScenario = `steps:
  - goto: /
  - wait_for: "#never-there"
  - screenshot: unreachable
`

// A failing scenario fails the run with TEST_FAILURE, its data complete,
// and the server is stopped by the run's end even though the plan never
// stops it; a process the run does not own is never signalled.
func TestRuntimeFailuresLeaveNothingBehind(t *testing.T) {
	scen := h.writePlan(t, "failing-scenario", failingScenario)
	stranger := exec.Command("sleep", "300")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer stranger.Process.Kill()
	port := freePortNumber(t)
	plan := fmt.Sprintf(`name: failing-webapp
failure_policy: continue_all
steps:
  - id: start
    capability: server.start
    with: {name: web, command: [python3, plans/examples/webapp/server.py], port: %s, readiness: {type: log, target: "listening on", timeout: 20s}}
  - id: browse
    capability: browser.run
    needs: [start]
    with: {base_url: "http://127.0.0.1:%s", scenario: %s}
`, port, port, "e2e-plans/"+filepath.Base(scen))
	code, r := h.run(t, h.writePlan(t, "failing-webapp", plan))
	browse := r.step(t, "browse")
	if code != 1 || r.Status != "failed" || browse.Envelope == nil || browse.Envelope.Error == nil || browse.Envelope.Error.Code != "TEST_FAILURE" {
		t.Fatalf("exit %d %s: %+v", code, r.Status, browse.Envelope)
	}
	data := browse.Envelope.Data.(map[string]any)
	if s := data["summary"].(map[string]any); s["passed"] != float64(1) || s["failed"] != float64(1) || s["skipped"] != float64(1) {
		t.Fatalf("summary %v", s)
	}
	runDir := filepath.Dir(r.Report.JSON)
	reg, err := runtimekit.ReadRegistry(runDir)
	if err != nil || len(reg.Processes) != 1 {
		t.Fatalf("processes %+v %v", reg, err)
	}
	web := reg.Processes[0]
	if web.StoppedAt == "" || pidAlive(web.PID) {
		t.Fatalf("the run ended and left its server running: %+v", web)
	}

	// A processes.json edited to name a process the run did not start:
	// server.stop refuses to signal it.
	forged := runtimekit.Registry{Processes: []runtimekit.Record{{Name: "web", PID: stranger.Process.Pid, PGID: stranger.Process.Pid,
		Argv: []string{"sleep", "300"}, Hash: "sha256:forged"}}}
	b, _ := json.Marshal(forged)
	if err := os.WriteFile(filepath.Join(runDir, runtimekit.ProcessesFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := runtimekit.Stop(runDir, "web", time.Second)
	if err == nil || !strings.Contains(err.Error(), "OWNERSHIP") && !strings.Contains(err.Error(), "refused to signal") || len(res.Skipped) != 1 {
		t.Fatalf("stop of a forged record: %v %+v", err, res)
	}
	if !pidAlive(stranger.Process.Pid) || stranger.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("a process the run does not own was signalled")
	}
}

// A run whose host dies moves on: worker A resolves the run and is
// killed mid-step; after host_wait, worker B (its own copy of the project,
// so another host) takes the step again and the rest of the run.
func TestRunMovesWhenItsHostIsLost(t *testing.T) {
	t.Parallel()
	const queue = "capflow-hosts"
	other, err := os.MkdirTemp(h.tmp, "project-b-")
	if err != nil {
		t.Fatal(err)
	}
	if err := copyTree(h.project, other); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=" + queue, "CAPFLOW_TEMPORAL_HOST_WAIT=3s"}
	a := workerAt(t, h.project, env...) // A: resolves the run
	file := h.writePlan(t, "hosts", `name: hosts
steps:
  - {id: first, capability: test.slow, with: {seconds: 0}}
  - {id: long, capability: test.slow, needs: [first], heartbeat: 2s, with: {seconds: 6}}
  - {id: last, capability: test.slow, needs: [long], with: {seconds: 0}}
`)
	code, env2, _ := h.capflow(t, "run", file, "--task-queue", queue, "--detach")
	var started struct {
		WorkflowID string `json:"workflow_id"`
	}
	data(t, env2, &started)
	if code != 0 {
		t.Fatalf("exit %d %s", code, env2.Message)
	}
	waitStepRunning(t, started.WorkflowID, "long")
	workerAt(t, other, env...) // B
	h.kill(a)
	var res struct {
		runResult
		LostHosts []string `json:"lost_hosts"`
	}
	code, env3, stderr := h.capflow(t, "status", started.WorkflowID, "--follow", "--task-queue", queue)
	data(t, env3, &res)
	if code != 0 || res.Status != "passed" || len(res.LostHosts) != 1 || !strings.Contains(res.LostHosts[0], queue+"@") {
		t.Fatalf("exit %d %s (%s), lost %v\n%s", code, res.Status, res.Message, res.LostHosts, stderr)
	}
	if !strings.HasPrefix(res.Report.JSON, other) {
		t.Fatalf("the report was written on %s, want the new host's project %s", res.Report.JSON, other)
	}
	validResult(t, started.WorkflowID)
	recordHistory(t, started.WorkflowID, "host-lost")
}

// TestFileHandOffAcrossHosts: two workers on one task queue, each with its
// own copy of the project (its own disk), run many runs of a plan whose
// steps hand files to each other; in each of two rounds the worker that
// holds some runs is SIGKILLed mid-run. Every run passes with the right
// file content: a run stays on one host, and a run that loses its host
// moves, running again there the steps whose files it lost.
func TestFileHandOffAcrossHosts(t *testing.T) {
	t.Parallel()
	const queue = "capflow-handoff"
	dirs := hostCopies(t, "handoff", 2)
	env := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=" + queue, "CAPFLOW_TEMPORAL_HOST_WAIT=3s"}
	var alive []*exec.Cmd
	start := func(dir string) *exec.Cmd {
		t.Helper()
		w := workerAt(t, dir, env...)
		alive = append(alive, w)
		return w
	}
	defer func() {
		for _, w := range alive {
			h.kill(w)
		}
	}()
	// Heartbeats bound how long a step that was running on the killed
	// worker goes unnoticed (tools heartbeat every second).
	file := h.writePlan(t, "handoff", `name: handoff
defaults: {heartbeat: 2s}
inputs:
  id: {type: string}
steps:
  - id: render
    capability: text.render
    with: {template: "note {{.id}}", values: {id: "${inputs.id}"}, output_path: ".capflow/out/handoff/${inputs.id}/note.txt", overwrite: true}
  - id: pack
    capability: archive.create
    needs: [render]
    with: {source: ".capflow/out/handoff/${inputs.id}/note.txt", output: ".capflow/out/handoff/${inputs.id}/note.tar.gz", overwrite: true}
  - id: wait
    capability: test.slow
    needs: [pack]
    with: {seconds: 12}
  - id: unpack
    capability: archive.extract
    needs: [wait]
    with: {archive: "${steps.pack.data.path}", dest: ".capflow/out/handoff/${inputs.id}/x", overwrite: true}
  - id: read
    capability: file.read
    with: {path: "${steps.unpack.data.dest}/note.txt"}
outputs:
  note: ${steps.read.data.content}
`)
	startRun := func(id string) string {
		t.Helper()
		code, e, stderr := h.capflow(t, "run", file, "--task-queue", queue, "--detach", "--input", "id="+id)
		var s struct {
			WorkflowID string `json:"workflow_id"`
		}
		data(t, e, &s)
		if code != 0 {
			t.Fatalf("start %s: exit %d %s\n%s", id, code, e.Message, stderr)
		}
		return s.WorkflowID
	}

	victim := start(dirs[0])
	var moved []string
	for round := 0; round < 2; round++ {
		survivor := dirs[1-round]
		// The victim alone takes the first runs: they are its for sure.
		var runs, held []string
		for i := 0; i < 3; i++ {
			id := fmt.Sprintf("r%d-held-%d", round, i)
			held = append(held, startRun(id))
		}
		// Every held run is mid-run (its files made, its wait running) when
		// its host dies: its 12 s wait outlasts starting the survivor and
		// three runs, even on a loaded machine.
		for _, wf := range held {
			waitStepRunning(t, wf, "wait")
		}
		moved = append(moved, held...)
		other := start(survivor)
		for i := 0; i < 3; i++ {
			runs = append(runs, startRun(fmt.Sprintf("r%d-spread-%d", round, i)))
		}
		h.kill(victim)

		for i, wf := range append(held, runs...) {
			var res struct {
				runResult
				LostHosts []string `json:"lost_hosts"`
			}
			code, e, stderr := h.capflow(t, "status", wf, "--follow", "--task-queue", queue)
			data(t, e, &res)
			name := fmt.Sprintf("r%d-held-%d", round, i)
			if i >= len(held) {
				name = fmt.Sprintf("r%d-spread-%d", round, i-len(held))
			}
			if code != 0 || res.Status != "passed" || res.Outputs["note"] != "note "+name {
				t.Fatalf("round %d, run %s: exit %d %s (%s), note %v\n%s", round, name, code, res.Status, res.Message, res.Outputs["note"], stderr)
			}
			if i < len(held) {
				// Held by the victim: moved to the survivor, its files made again there.
				if len(res.LostHosts) != 1 || !strings.HasPrefix(res.Report.JSON, survivor) {
					t.Fatalf("round %d, run %s: lost %v, report %s (want it on %s)", round, name, res.LostHosts, res.Report.JSON, survivor)
				}
				if b, err := os.ReadFile(filepath.Join(survivor, ".capflow/out/handoff", name, "x/note.txt")); err != nil || string(b) != "note "+name {
					t.Fatalf("round %d, run %s: the survivor's copy of the note: %q %v", round, name, b, err)
				}
			}
		}
		victim = other
	}
	recordChange(t, "rehome-dependencies", "host-lost-rehome", moved...)
}
