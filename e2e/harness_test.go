// Package e2e tests capflow end to end: a real Temporal dev server, the
// real capflow-worker and capflow binaries, real tool subprocesses and
// real files. Under `make test` a missing Temporal binary is a failure,
// never a skip; `go test -short` (make test-unit) leaves these tests out.
package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/capflow/capflow/internal/envelope"
)

var h *harness

type harness struct {
	repo    string
	bin     string // folder with capflow and capflow-worker
	project string
	server  *testsuite.DevServer
	address string
	llm     *httptest.Server
	client  client.Client
	tmp     string

	temporalBin string
	serverLog   *os.File

	mu      sync.Mutex
	workers []*exec.Cmd // the live ones
	started int         // every worker started, each with its log worker-N.log
	main    *exec.Cmd   // the shared project's worker (startWorker), which killWorker kills
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped with -short (make test runs them)")
		os.Exit(0)
	}
	code := 1
	func() {
		var err error
		h, err = setup()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e setup failed: %v\n", err)
			return
		}
		defer h.teardown()
		code = m.Run()
	}()
	os.Exit(code)
}

func temporalBinary(repo string) (string, error) {
	if p := os.Getenv("CAPFLOW_TEMPORAL_BIN"); p != "" {
		return p, nil
	}
	if p := filepath.Join(repo, "bin", "temporal"); fileExists(p) {
		return p, nil
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no Temporal CLI: run `make test` (it builds bin/temporal) or set CAPFLOW_TEMPORAL_BIN")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// freePort is a loopback address no one listens on now.
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("no free port on loopback: " + err.Error())
	}
	defer l.Close()
	return l.Addr().String()
}

// freePortNumber is freePort's port.
func freePortNumber(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(freePort())
	return port
}

func setup() (*harness, error) {
	wd, _ := os.Getwd()
	repo := filepath.Dir(wd)
	tmp, err := os.MkdirTemp("", "capflow-e2e-")
	if err != nil {
		return nil, err
	}
	h := &harness{repo: repo, tmp: tmp, bin: filepath.Join(tmp, "bin"), project: filepath.Join(tmp, "project")}
	for _, b := range [][2]string{{"capflow", "./starter"}, {"capflow-worker", "./worker"}} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(h.bin, b[0]), b[1])
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v\n%s", b[0], err, out)
		}
	}
	if err := copyTree(filepath.Join(wd, "testdata", "project"), h.project); err != nil {
		return nil, err
	}
	if err := os.Symlink(filepath.Join(repo, "kits"), filepath.Join(h.project, "kits")); err != nil {
		return nil, err
	}
	// The example plans, copied, not linked: builtins refuse paths that
	// leave the project through a symlink.
	if err := copyTree(filepath.Join(repo, "plans"), filepath.Join(h.project, "plans")); err != nil {
		return nil, err
	}
	tbin, err := temporalBinary(repo)
	if err != nil {
		return nil, err
	}
	h.temporalBin = tbin
	if err := h.connect(tmp); err != nil {
		return nil, err
	}
	h.llm = httptest.NewServer(http.HandlerFunc(fakeLLM))
	if err := h.startWorker(); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *harness) teardown() {
	h.mu.Lock()
	for _, w := range h.workers {
		if w.Process != nil {
			_ = w.Process.Signal(syscall.SIGTERM)
		}
	}
	h.mu.Unlock()
	for _, w := range h.workers {
		done := make(chan struct{})
		go func() { _ = w.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = w.Process.Kill()
		}
	}
	if h.server != nil {
		_ = h.server.Stop()
	}
	if h.llm != nil {
		h.llm.Close()
	}
	if os.Getenv("CAPFLOW_E2E_KEEP") == "" { // kept to read the worker's log
		_ = os.RemoveAll(h.tmp)
	}
}

func (h *harness) env() []string {
	return append(os.Environ(), "CAPFLOW_TEMPORAL_ADDRESS="+h.address, "E2E_TOKEN=e2e-super-secret-value", "CAPFLOW_LOG_LEVEL=info",
		"CAPFLOW_ROUTER_LLM_BASE_URL="+h.llm.URL+"/v1", "CAPFLOW_ROUTER_LLM_MODEL=e2e-model", "CAPFLOW_ROUTER_LLM_API_KEY_ENV=E2E_LLM_KEY",
		"E2E_LLM_KEY=sk-e2e-llm-key", "CAPFLOW_OWNERSHIP_KEY_FILE="+filepath.Join(h.tmp, "ownership.key"))
}

// fakeLLM speaks the chat-completions protocol: requests that mention
// "confident" get a two-step plan of test.noop with high confidence,
// "unsure" ones a step whose confidence is below router.min_confidence.
func fakeLLM(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	user := ""
	if n := len(req.Messages); n > 0 {
		user = req.Messages[n-1].Content
	}
	plan := `{"name":"llm-noop","steps":[{"id":"first","capability":"test.noop","coverage_confidence":0.92,"coverage_rationale":"noop does it"},{"id":"second","capability":"test.noop","needs":["first"],"coverage_confidence":0.9,"coverage_rationale":"again"}]}`
	if strings.Contains(user, "unsure") {
		plan = `{"name":"llm-unsure","steps":[{"id":"guess","capability":"test.noop","coverage_confidence":0.3,"coverage_rationale":"a guess"}]}`
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion", "model": "e2e-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": plan}}}})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// logPath is a file in the test project's logs/ folder, which the test
// tools that keep a log declare writable (sandbox: {write: [logs]}): a
// confined tool writes nowhere else but its step folder.
func (h *harness) logPath(name string) string {
	dir := filepath.Join(h.project, "logs")
	_ = os.MkdirAll(dir, 0o755)
	return filepath.Join(dir, name)
}

// freshLog is logPath with no earlier test's lines (-count=N runs the
// same test again in the same project).
func (h *harness) freshLog(name string) string {
	p := h.logPath(name)
	_ = os.Remove(p)
	return p
}

// capflow runs the CLI binary against the test project.
func (h *harness) capflow(t *testing.T, args ...string) (int, envelope.Envelope, string) {
	t.Helper()
	return h.capflowEnv(t, nil, args...)
}

// runCmd runs a command to its end: its exit code, stdout and stderr (a
// command that cannot start fails the test).
func runCmd(t *testing.T, cmd *exec.Cmd) (int, bytes.Buffer, bytes.Buffer) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out, errb
	} else if err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return 0, out, errb
}

// capflowEnv is capflow with extra environment variables.
func (h *harness) capflowEnv(t *testing.T, extra []string, args ...string) (int, envelope.Envelope, string) {
	t.Helper()
	return h.capflowAt(t, h.project, extra, args...)
}

// capflowAt is capflow in another project folder.
func (h *harness) capflowAt(t *testing.T, project string, extra []string, args ...string) (int, envelope.Envelope, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), append(args, "--project", project, "--output", "json")...)
	cmd.Env = append(h.env(), extra...)
	code, out, errb := runCmd(t, cmd)
	var env envelope.Envelope
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("capflow %v: stdout is not an envelope (%v)\nstdout: %s\nstderr: %s", args, err, out.String(), errb.String())
	}
	if dec.More() {
		t.Fatalf("capflow %v printed more than one JSON document", args)
	}
	if errs := envelope.Validate(&env); len(errs) > 0 {
		t.Fatalf("capflow %v: invalid envelope %v", args, errs)
	}
	if strings.Contains(errb.String(), "goroutine ") {
		t.Fatalf("capflow %v printed a Go stack trace:\n%s", args, errb.String())
	}
	return code, env, errb.String()
}

// writePlan writes a plan into the project and returns its path. Not
// under plans/: that is a copy of the repository's own plans.
func (h *harness) writePlan(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(h.project, "e2e-plans", name+".yaml")
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// copyTree copies src to dst; a file that vanishes meanwhile (a test
// beside this one removed its log) is left out.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			if rel == ".capflow" {
				return filepath.SkipDir // runs and state are the copy's own
			}
			return os.MkdirAll(target, 0o755)
		}
		if info.Mode()&os.ModeSymlink != 0 {
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode())
	})
}

// data decodes an envelope's data into v.
func data(t *testing.T, env envelope.Envelope, v any) {
	t.Helper()
	b, _ := json.Marshal(env.Data)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode data: %v", err)
	}
}
