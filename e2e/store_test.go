package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/procfs"
)

// With a shared artifact store, a run whose host dies (and its disk with
// it) goes on on another host with its own copy of the project, reading
// what finished steps stored from the store: the producer that is not
// idempotent, which could never run again, ran once; the idempotent one
// did not run again either (its token is the one the consumer reads from
// its file, fetched from the store). Without the store the consumer finds
// the producer's data on the lost host, and the run fails.
func TestSharedStoreCarriesDataAcrossHosts(t *testing.T) {
	t.Parallel()
	store := filepath.Join(h.tmp, "shared-artifacts")
	id := moveRun(t, "capflow-store", false, "CAPFLOW_ARTIFACTS_URL=file://"+store)
	recordHistory(t, id, "host-lost-store")
	if arts, _ := filepath.Glob(filepath.Join(store, "sha256", "*", "*")); len(arts) < 3 {
		t.Fatalf("the shared store holds %d artifacts", len(arts))
	}
	// The report, written on the host that finished the run, is read on
	// another (the test's project has no folder of the run): by the
	// console, which draws the ended run from it, and by `capflow report`.
	env := []string{"CAPFLOW_ARTIFACTS_URL=file://" + store}
	base := startConsoleEnv(t, env)
	var rep struct{ HTML string }
	var states []string
	getJSON(t, base+"/api/runs/"+id+"/report", &rep)
	getJSON(t, base+"/api/runs/"+id+"/states", &states)
	if !strings.Contains(rep.HTML, "store-move") || strings.Join(states, " ") != "succeeded succeeded succeeded succeeded succeeded succeeded" {
		t.Fatalf("the console on another host: states %v, report %.300s", states, rep.HTML)
	}
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), "report", id, "--project", h.project)
	cmd.Env = append(h.env(), env...)
	code, out, errb := runCmd(t, cmd)
	if code != 0 || !strings.Contains(out.String(), "| check |") {
		t.Fatalf("capflow report on another host: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}

// getJSON decodes what GET url answers (200 or the test fails).
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(body, v) != nil {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
}

// The same over S3: a real S3-compatible server (versitygw over a folder).
func TestS3StoreCarriesDataAcrossHosts(t *testing.T) {
	t.Parallel()
	addr, data := startS3(t)
	moveRun(t, "capflow-store-s3", false, fmt.Sprintf("CAPFLOW_ARTIFACTS_URL=s3://capflow?endpoint=http://%s&region=us-east-1&use_path_style=true&prefix=e2e/", addr),
		"AWS_ACCESS_KEY_ID=capflow", "AWS_SECRET_ACCESS_KEY=capflow-secret")
	if arts, _ := filepath.Glob(filepath.Join(data, "capflow", "e2e", "sha256", "*", "*")); len(arts) < 3 {
		t.Fatalf("the S3 server holds %d artifacts", len(arts))
	}
}

// startS3 starts versitygw (make versitygw builds it into bin/) on a
// loopback port over a folder holding the bucket "capflow".
func startS3(t *testing.T) (string, string) {
	t.Helper()
	bin := os.Getenv("CAPFLOW_VERSITYGW_BIN")
	if bin == "" {
		bin = filepath.Join(h.repo, "bin", "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no S3 server to test against: %v (make versitygw builds it; make test does)", err)
	}
	addr := freePort()
	data := t.TempDir()
	if err := os.Mkdir(filepath.Join(data, "capflow"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(bin, "--port", addr, "--access", "capflow", "--secret", "capflow-secret", "posix", data)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, data
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("versitygw did not listen on %s", addr)
	return "", ""
}

// storeMovePlan is moveRun's: a producer that may not run again, one that
// may, a long step the host is lost during, and their consumers.
const storeMovePlan = `name: store-move
defaults: {heartbeat: 2s}
steps:
  - {id: make, capability: test.big_once}
  - {id: stamp, capability: test.stamp}
  - {id: wait, capability: test.slow, needs: [make, stamp], with: {seconds: 8}}
  - {id: check, capability: test.stamp, needs: [wait], with: {read: "${steps.stamp.data.file}"}}
  - id: use
    capability: json.query
    needs: [wait]
    with: {query: ".blob | length", input: "${steps.make.data}"}
  - {id: sum, capability: file.checksum, needs: [wait], with: {path: "${steps.stamp.data.file}"}}
outputs:
  length: ${steps.use.data.result}
  read: ${steps.check.data.read}
  sum: ${steps.sum.data.sha256}
`

// bigOnceTool writes test.big_once (300 KB of data, not idempotent) into
// the project at dir.
func bigOnceTool(t *testing.T, dir string) {
	t.Helper()
	tool := filepath.Join(dir, "tools", "big-once")
	if err := os.MkdirAll(tool, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `name: big-once
version: 1.0.0
description: Outputs 300 KB of data, not idempotent
capabilities: [test.big_once]
input_schema: {type: object}
output_schema: {type: object, required: [blob, size], properties: {blob: {type: string}, size: {type: integer}}}
entrypoint: {type: command, command: [./run.sh]}
idempotent: false
`
	if err := os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	run := "#!/bin/sh\nexec \"$(dirname \"$0\")/../big/run.sh\"\n"
	if err := os.WriteFile(filepath.Join(tool, "run.sh"), []byte(run), 0o755); err != nil {
		t.Fatal(err)
	}
}

// moveRun runs a plan on one host, kills it (and its disk, unless
// keepDisk) during a long step, and lets a worker with its own copy of the
// project finish it from the store the workers' environment (storeEnv)
// names.
func moveRun(t *testing.T, queue string, keepDisk bool, storeEnv ...string) string {
	// Each host's copy gets the test's tools (the shared project is left
	// as it is: tests beside this one copy it).
	dirs := hostCopies(t, "store", 2)
	for _, d := range dirs {
		bigOnceTool(t, d)
		stampTool(t, d)
	}
	env := append([]string{"CAPFLOW_TEMPORAL_TASK_QUEUE=" + queue, "CAPFLOW_TEMPORAL_HOST_WAIT=3s"}, storeEnv...)
	startAt := func(dir string) *exec.Cmd {
		t.Helper()
		return workerAt(t, dir, env...)
	}
	plan := filepath.Join(dirs[0], "store-move.yaml")
	if err := os.WriteFile(plan, []byte(storeMovePlan), 0o644); err != nil {
		t.Fatal(err)
	}
	victim := startAt(dirs[0])
	s := struct{ WorkflowID string }{startDetachedAt(t, dirs[0], env, plan)}
	waitStepRunning(t, s.WorkflowID, "wait")
	// The token the producer wrote, as its file on the first host has it.
	files, _ := filepath.Glob(filepath.Join(dirs[0], ".capflow", "runs", "*", "steps", "stamp", "token.txt"))
	if len(files) != 1 {
		t.Fatalf("the producer's file on the first host: %v", files)
	}
	raw, _ := os.ReadFile(files[0])
	was := strings.TrimSpace(string(raw))
	startAt(dirs[1])
	h.kill(victim)
	// The lost host's disk goes with it (or stays, readable at its path:
	// the new host still reads its own copy, fetched from the store).
	if !keepDisk {
		if err := os.RemoveAll(filepath.Join(dirs[0], ".capflow", "runs")); err != nil {
			t.Fatal(err)
		}
	}
	var res runResult
	code, e, stderr := h.capflow(t, "status", s.WorkflowID, "--follow", "--task-queue", queue)
	data(t, e, &res)
	if code != 0 || res.Status != "passed" || fmt.Sprint(res.Outputs["length"]) != "300000" {
		t.Fatalf("exit %d %s (%s), outputs %v\n%s", code, res.Status, res.Message, res.Outputs, stderr)
	}
	if m := res.step(t, "make"); m.Attempts != 1 {
		t.Fatalf("the producer ran %d times", m.Attempts)
	}
	st := res.step(t, "stamp")
	tok, _ := st.Envelope.Data.(map[string]any)["token"].(string)
	if st.Attempts != 1 || tok == "" || tok != was || res.Outputs["read"] != tok {
		t.Fatalf("the idempotent producer: attempts %d, token %q (%q before the move); the consumer read %q from its file", st.Attempts, tok, was, res.Outputs["read"])
	}
	if len(st.Artifacts) != 1 || st.Artifacts[0].Pointer != "/file" {
		t.Fatalf("the producer's file is not named as an artifact: %+v", st.Artifacts)
	}
	if sum := sha256.Sum256(raw); res.Outputs["sum"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("the builtin consumer of the producer's file: %v (%s)", res.Outputs["sum"], res.step(t, "sum").Envelope.Message)
	}
	return s.WorkflowID
}

// TestMovedRunReadsItsOwnCopy: the lost host's disk stays readable at its
// path (another folder of this machine, or a mount every host sees); the
// host that continues the run still reads the producer's file from its own
// copy, fetched from the store by digest, and a builtin consumer (which
// reads only the project and the run folder) gets that copy's path.
func TestMovedRunReadsItsOwnCopy(t *testing.T) {
	t.Parallel()
	moveRun(t, "capflow-store-keep", true, "CAPFLOW_ARTIFACTS_URL=file://"+filepath.Join(h.tmp, "shared-artifacts-keep"))
}

// hostCopies copies the test project n times: n hosts, each with its own
// disk.
func hostCopies(t *testing.T, name string, n int) []string {
	t.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		d, err := os.MkdirTemp(h.tmp, fmt.Sprintf("%s-%c-", name, 'a'+i))
		if err != nil {
			t.Fatal(err)
		}
		if err := copyTree(h.project, d); err != nil {
			t.Fatal(err)
		}
		dirs[i] = d
	}
	return dirs
}

// startHost starts a worker on a host's copy and returns it.
func startHost(t *testing.T, dir string, env []string) *exec.Cmd {
	t.Helper()
	w, err := h.spawn(dir, env...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// hostMove runs plan on a first host of a queue sharing a file store,
// starts a second host once step is running, does lose to the first (a
// kill, a stop) and returns the run's ID once it passed on the second,
// naming one lost host.
func hostMove(t *testing.T, name, plan, step string, lose func(first *exec.Cmd)) string {
	t.Helper()
	queue := "capflow-" + name
	dirs := hostCopies(t, name, 2)
	env := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=" + queue, "CAPFLOW_TEMPORAL_HOST_WAIT=3s",
		"CAPFLOW_ARTIFACTS_URL=file://" + filepath.Join(h.tmp, "shared-artifacts-"+name)}
	first := startHost(t, dirs[0], env)
	id := startDetached(t, h.writePlan(t, name, plan), "--task-queue", queue)
	waitStepRunning(t, id, step)
	defer h.kill(startHost(t, dirs[1], env))
	lose(first)
	var res struct {
		runResult
		LostHosts []string `json:"lost_hosts"`
	}
	code, e, stderr := h.capflow(t, "status", id, "--follow", "--task-queue", queue)
	data(t, e, &res)
	if code != 0 || res.Status != "passed" || len(res.LostHosts) != 1 {
		t.Fatalf("exit %d %s (%s), lost %v\n%s", code, res.Status, res.Message, res.LostHosts, stderr)
	}
	if ic := res.step(t, step).ItemCounts; ic != nil && ic.Succeeded != ic.Count {
		t.Fatalf("items of %s: %+v", step, ic)
	}
	return id
}

// A for_each step's items follow the run when its host is lost, as steps
// do (the soak found them failing there, issue 41): the run passes on
// another host with every item succeeded, naming the host it lost.
func TestMovedRunCarriesItsItems(t *testing.T) {
	t.Parallel()
	id := hostMove(t, "items-move", `name: items-move
defaults: {heartbeat: 2s}
steps:
  - {id: each, capability: test.slow, for_each: [1, 2, 3, 4], max_parallel: 2, with: {seconds: 3}}
`, "each", h.kill)
	recordHistory(t, id, "host-lost-items")
}

// A host stopped mid-step (SIGSTOP: a frozen machine, a partition) keeps
// its open polls, so the server hands it the step's attempts and each ends
// by heartbeat; the step then follows the run to another host instead of
// failing there (the soak found it failing, issue 41).
func TestStoppedHostsStepMoves(t *testing.T) {
	t.Parallel()
	var tree []int
	defer func() {
		for _, p := range tree {
			_ = syscall.Kill(p, syscall.SIGCONT)
		}
	}()
	id := hostMove(t, "silent-move", `name: silent-move
steps:
  - {id: wait, capability: test.slow, heartbeat: 2s, retry: {max_attempts: 1}, with: {seconds: 6}}
  - {id: after, capability: test.slow, needs: [wait], with: {seconds: 1}}
`, "wait", func(first *exec.Cmd) {
		t.Cleanup(func() { h.kill(first) })
		tree = append([]int{first.Process.Pid}, procfs.Descendants(first.Process.Pid)...)
		for _, p := range tree {
			_ = syscall.Kill(p, syscall.SIGSTOP)
		}
	})
	recordHistory(t, id, "host-silent")
}
