package runtimekit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

func testEnv(t *testing.T) *builtin.Env {
	t.Helper()
	root := t.TempDir()
	run := filepath.Join(root, ".capflow", "runs", "r1")
	work := filepath.Join(run, "steps", "s")
	for _, d := range []string{run, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &builtin.Env{Root: root, RunDir: run, Workdir: work, Feedback: envelope.NewBuilder("t")}
}

func code(err error) caperr.Code {
	var ce *caperr.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func start(t *testing.T, env *builtin.Env, in map[string]any) (map[string]any, error) {
	t.Helper()
	out, err := serverStart(context.Background(), in, env)
	m, _ := out.(map[string]any)
	t.Cleanup(func() { _, _ = Stop(env.RunDir, "", time.Second) })
	return m, err
}

// A sleep the run started is stopped; a recycled pid, a forged record, a
// process the run never started are never signalled.
func TestOwnership(t *testing.T) {
	env := testEnv(t)
	data, err := start(t, env, map[string]any{"name": "nap", "command": []any{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	pid := data["pid"].(int)
	stranger := exec.Command("sleep", "60")
	stranger.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer stranger.Process.Kill()

	// Edit the record to name the stranger: the hash no longer matches.
	err = withRegistry(env.RunDir, func(reg *Registry) error {
		forged := reg.Processes[0]
		forged.Name, forged.PID, forged.PGID = "forged", stranger.Process.Pid, stranger.Process.Pid
		reg.Processes = append(reg.Processes, forged)
		// A record whose hash is right but whose pid now runs something
		// else (a recycled pid): the start time gives it away.
		recycled := Record{Name: "recycled", PID: stranger.Process.Pid, PGID: stranger.Process.Pid, StartTicks: 1, Argv: []string{"sleep", "60"}, Cwd: env.Root}
		recycled.Hash = ownership(env.RunDir, recycled.PID, recycled.StartTicks, recycled.Argv, recycled.Cwd)
		reg.Processes = append(reg.Processes, recycled)
		// Everything a file can say, right: the stranger's pid, start
		// time, group, a hash computed for them, even the run's real
		// token. The stranger's environment lacks the token.
		ticks, _ := startTicks(stranger.Process.Pid)
		victim := Record{Name: "victim", PID: stranger.Process.Pid, PGID: stranger.Process.Pid, StartTicks: ticks, Argv: []string{"sleep", "60"}, Cwd: env.Root, Token: reg.Processes[0].Token}
		victim.Hash = ownership(env.RunDir, victim.PID, victim.StartTicks, victim.Argv, victim.Cwd)
		reg.Processes = append(reg.Processes, victim)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"forged", "recycled", "victim"} {
		res, err := Stop(env.RunDir, name, time.Second)
		if code(err) != caperr.OwnershipValidationError || len(res.Skipped) != 1 || len(res.Stopped) != 0 {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
	}
	if _, err := Stop(env.RunDir, "ghost", time.Second); code(err) != caperr.InvalidInput {
		t.Fatalf("stop of a name never started: %v", err)
	}
	res, err := Stop(env.RunDir, "", time.Second)
	if err != nil || len(res.Stopped) != 1 || res.Stopped[0] != pid || len(res.Skipped) != 3 {
		t.Fatalf("stop all: %v %+v", err, res)
	}
	if alive(pid) {
		t.Fatal("the run's sleep survived")
	}
	if stranger.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("a process the run does not own was signalled")
	}
	// processes.json that is not JSON: a clear error, nothing signalled.
	_ = os.WriteFile(filepath.Join(env.RunDir, ProcessesFile), []byte("{oops"), 0o644)
	if _, err := Stop(env.RunDir, "", time.Second); code(err) != caperr.OwnershipValidationError {
		t.Fatalf("garbled processes.json: %v", err)
	}
}

// A server that rewrites its environment (nginx, setproctitle; here env -i)
// no longer shows its token: the record's seal, made with a key outside
// the project, still proves it is the run's. A forged record has no seal.
// (Unconfined: a confined server's recorded process is its bubblewrap,
// which keeps the token whatever the server does.)
func TestSealStandsWhenTheTokenIsGone(t *testing.T) {
	env := testEnv(t)
	env.Sandbox = sandbox.ModeOff
	data, err := start(t, env, map[string]any{"name": "bare", "command": []any{"env", "-i", "sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	pid := data["pid"].(int)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if tok, _ := environToken(pid); tok == "" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tok, _ := environToken(pid); tok != "" {
		t.Fatal("env -i kept the token")
	}
	res, err := Stop(env.RunDir, "bare", time.Second)
	if err != nil || len(res.Stopped) != 1 || alive(pid) {
		t.Fatalf("%v %+v", err, res)
	}
}

// A run whose processes.json cannot be read still stops what it started:
// its servers carry its token, found through /proc. Nothing else is.
func TestSweepWithoutTheRecord(t *testing.T) {
	env := testEnv(t)
	data, err := start(t, env, map[string]any{"name": "nap", "command": []any{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	other := testEnv(t)
	odata, err := start(t, other, map[string]any{"name": "nap", "command": []any{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(env.RunDir, ProcessesFile), []byte("{oops"), 0o644)
	got := Sweep(env.RunDir, time.Second)
	if len(got) != 1 || got[0] != data["pid"].(int) || alive(got[0]) {
		t.Fatalf("swept %v, want [%d] stopped", got, data["pid"])
	}
	if !alive(odata["pid"].(int)) {
		t.Fatal("another run's server was stopped")
	}
}

// A process that ignores SIGTERM is killed after grace. It is ready once
// its trap is set (a fixed wait was not always long enough in CI: the
// shell, still without its trap, ended at SIGTERM).
func TestStopEscalates(t *testing.T) {
	env := testEnv(t)
	_, err := start(t, env, map[string]any{"name": "stubborn", "command": []any{"sh", "-c", "trap '' TERM; echo trapped; while :; do sleep 1; done"},
		"readiness": map[string]any{"type": "log", "target": "trapped", "timeout": "30s"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Stop(env.RunDir, "stubborn", 300*time.Millisecond)
	reg, _ := ReadRegistry(env.RunDir)
	if err != nil || len(res.Stopped) != 1 || !strings.HasPrefix(reg.Processes[0].Stop, "SIGKILL") {
		t.Fatalf("%v %+v %+v", err, res, reg.Processes)
	}
}

func TestReadiness(t *testing.T) {
	env := testEnv(t)
	lo, _ := egress.ParseEntry("127.0.0.1")
	env.Net = &egress.Rules{Allow: []egress.Entry{lo}} // the listener below is the host's
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taken := l.Addr().(*net.TCPAddr).Port
	defer l.Close()
	if err := os.Symlink("/etc", filepath.Join(env.Root, "etc-link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   map[string]any
		code caperr.Code
		want string
	}{
		{"log ready", map[string]any{"name": "a", "command": []any{"sh", "-c", "echo booting; sleep 0.3; echo listening now; sleep 60"},
			"readiness": map[string]any{"type": "log", "target": "listening", "timeout": "5s"}}, "", "matched"},
		{"tcp ready", map[string]any{"name": "b", "command": []any{"sleep", "60"},
			"readiness": map[string]any{"type": "tcp", "target": l.Addr().String(), "timeout": "5s"}}, "", "ok"},
		{"dies first", map[string]any{"name": "c", "command": []any{"sh", "-c", "echo oops >&2; exit 3"},
			"readiness": map[string]any{"type": "log", "target": "never", "timeout": "5s"}}, caperr.StartupError, "oops"}, // "exited at once" or "before it was ready", with its log's end
		{"never ready", map[string]any{"name": "d", "command": []any{"sleep", "60"},
			"readiness": map[string]any{"type": "http", "target": "http://127.0.0.1:1/", "timeout": "1s"}}, caperr.ReadinessTimeout, "not ready within 1s"},
		{"tcp to the host's loopback, not allowed", map[string]any{"name": "b2", "command": []any{"sleep", "60"},
			"readiness": map[string]any{"type": "tcp", "target": l.Addr().String(), "timeout": "1s"}, "net": "none"}, caperr.ReadinessTimeout, "a loopback address"},
		{"port taken", map[string]any{"name": "e", "command": []any{"sleep", "60"}, "port": taken}, caperr.StartupError, "already taken"},
		{"no such command", map[string]any{"name": "f", "command": []any{"no-such-binary-xyz"}}, caperr.StartupError, "not found"},
		{"bad name", map[string]any{"name": "../x", "command": []any{"sleep", "1"}}, caperr.InvalidInput, "name"},
		{"cwd outside", map[string]any{"name": "g", "command": []any{"sleep", "1"}, "cwd": "/etc"}, caperr.InvalidInput, "outside"},
		{"cwd through a link that leads out", map[string]any{"name": "h", "command": []any{"sleep", "1"}, "cwd": "etc-link"}, caperr.InvalidInput, "outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := env
			if c.in["net"] == "none" {
				delete(c.in, "net")
				e := *env
				e.Net, env = nil, &e
			}
			data, err := start(t, env, c.in)
			if code(err) != c.code {
				t.Fatalf("code %q, want %q: %v", code(err), c.code, err)
			}
			text := fmt.Sprint(err) + " " + fmt.Sprint(data["probe_evidence"])
			if !strings.Contains(text, c.want) {
				t.Fatalf("%q lacks %q", text, c.want)
			}
		})
	}
	// Nothing a failed start began is left running.
	reg, _ := ReadRegistry(env.RunDir)
	for _, r := range reg.Processes {
		if (r.Name == "c" || r.Name == "d") && alive(r.PID) {
			t.Fatalf("%s left running", r.Name)
		}
	}
}

func TestParseScenario(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("steps:\n  - goto: /\n  - hover: '#x'\n  - fill: 3\n  - screenshot: ../evil\n"), 0o644)
	_, err := ParseScenario(bad, "bad.yaml")
	var probs caperr.Problems
	if !errors.As(err, &probs) || len(probs) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
	for i, want := range []string{"bad.yaml:3", "bad.yaml:4", "bad.yaml:5"} {
		if !strings.Contains(probs[i].Error(), want) {
			t.Fatalf("problem %d %q lacks %q", i, probs[i].Error(), want)
		}
	}
	good := filepath.Join(dir, "good.yaml")
	_ = os.WriteFile(good, []byte("steps:\n  - goto: /\n  - fill: {'#q': capflow}\n  - expect_text: {h1: Demo}\n"), 0o644)
	acts, err := ParseScenario(good, "good.yaml")
	if err != nil || len(acts) != 3 || acts[1].Target != "#q" || acts[1].Text != "capflow" || acts[2].Line != 4 {
		t.Fatalf("%v %+v", err, acts)
	}
}

func TestLogsCollect(t *testing.T) {
	env := testEnv(t)
	log := filepath.Join(env.Root, "app.log")
	_ = os.WriteFile(log, []byte("starting\nWARN slow disk\nERROR cannot open db\npanic: boom\ncustom-bad thing\n"), 0o644)
	out, err := logsCollect(context.Background(), map[string]any{"sources": []any{"app.log"}, "patterns": []any{"custom-bad"}}, env)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out)
	var got struct {
		Issues []Issue `json:"issues"`
		Index  string  `json:"log_index_path"`
	}
	_ = json.Unmarshal(b, &got)
	if len(got.Issues) != 3 || got.Issues[0].Severity != caperr.Critical || !strings.HasSuffix(got.Issues[0].Evidence, "app.log:4: panic: boom") {
		t.Fatalf("%+v", got.Issues)
	}
	if _, err := os.Stat(got.Index); err != nil {
		t.Fatal(err)
	}
	if _, err := logsCollect(context.Background(), map[string]any{"sources": []any{"/etc/passwd"}}, env); code(err) != caperr.InvalidInput {
		t.Fatalf("a source outside the project: %v", err)
	}
	_ = os.Symlink("/etc/passwd", filepath.Join(env.Root, "link.log"))
	if _, err := logsCollect(context.Background(), map[string]any{"sources": []any{"link.log"}}, env); code(err) != caperr.InvalidInput {
		t.Fatalf("a source that leads outside through a link: %v", err)
	}
	// A FIFO with no writer would block the worker's thread until the
	// step's timeout: refused at once.
	if err := syscall.Mkfifo(filepath.Join(env.Root, "pipe.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := logsCollect(ctx, map[string]any{"sources": []any{"pipe.log"}}, env); code(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a FIFO source: %v", err)
	}
}

// A confined server that daemonizes keeps running until server.stop, which
// leaves nothing of it; it writes in its own folder (its step's) and
// nowhere else: not the run's records, not the project (hostile findings
// at 6003afe, 13: a server rewrote another step's stored output).
func TestConfinedServerDaemonizes(t *testing.T) {
	if why := sandbox.Probe().Missing(); why != "" {
		t.Fatalf("this machine cannot confine: %s", why)
	}
	env := testEnv(t)
	env.Confine = &manifest.Sandbox{Network: true}
	marker := fmt.Sprintf("sleep %d.5", 200000+time.Now().UnixNano()%100000)
	script := fmt.Sprintf(`echo own > %q; echo run > %q; echo proj > %q 2>/dev/null || echo "read-only project"; setsid %s </dev/null >/dev/null 2>&1 & exit 0`,
		filepath.Join(env.Workdir, "written.txt"), filepath.Join(env.RunDir, "records.txt"), filepath.Join(env.Root, "escaped.txt"), marker)
	data, err := start(t, env, map[string]any{"name": "d", "command": []any{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if out, _ := exec.Command("pgrep", "-f", marker).Output(); len(out) == 0 {
		t.Fatal("the daemonized server is gone before server.stop")
	}
	if _, err := os.Stat(filepath.Join(env.Root, "escaped.txt")); err == nil {
		t.Fatal("the server wrote in the project outside the run folder")
	}
	if b, _ := os.ReadFile(filepath.Join(env.Workdir, "written.txt")); string(b) != "own\n" {
		t.Fatalf("its own folder: %q", b)
	}
	if _, err := os.Stat(filepath.Join(env.RunDir, "records.txt")); err == nil {
		t.Fatal("the server wrote in the run's folder outside its own")
	}
	res, err := Stop(env.RunDir, "d", 500*time.Millisecond)
	if err != nil || len(res.Stopped) != 1 || res.Stopped[0] != data["pid"].(int) {
		t.Fatalf("%v %+v", err, res)
	}
	for i := 0; i < 40; i++ {
		if out, _ := exec.Command("pgrep", "-f", marker).Output(); len(out) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the daemonized server outlived server.stop")
}

// A confined server listens in a network namespace of its own: the worker
// publishes its port on this machine's loopback, where its run (and only
// its run) reaches it; what the server itself reaches goes through the
// egress proxy, which refuses the host's loopback.
func TestConfinedServerIsPublishedToItsRun(t *testing.T) {
	if why := sandbox.Probe().Missing(); why != "" {
		t.Fatalf("this machine cannot confine: %s", why)
	}
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "the host's") }))
	defer host.Close()
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	env := testEnv(t)
	env.Confine = &manifest.Sandbox{Network: true}
	out := filepath.Join(env.Workdir, "curl.txt")
	script := fmt.Sprintf(`curl -s -o /dev/null -w '%%{http_code}' %s/ > %q; exec python3 -m http.server --bind 127.0.0.1 %d`, host.URL, out, port)
	target := fmt.Sprintf("http://127.0.0.1:%d/", port)
	_, err := start(t, env, map[string]any{"name": "web", "command": []any{"sh", "-c", script},
		"readiness": map[string]any{"type": "http", "target": target, "timeout": "20s"}})
	if err != nil {
		t.Fatalf("the run's probe did not reach its server: %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "403" {
		t.Fatalf("the server reached the host's loopback through the proxy: %q", b)
	}
	if _, err := env.Rules().Client().Get(target); err != nil {
		t.Fatalf("the run's own step: %v", err)
	}
	if _, err := (&egress.Rules{}).For(filepath.Join(env.Root, "another-run")).Client().Get(target); err == nil {
		t.Fatal("another run reached this run's server")
	}
}

// TestBrowserOnlyOnTheWeb: browser.run takes an http(s) base only: its
// Chromium runs as the worker, and a file:// base read the worker's files
// (found attacking issue 53).
func TestBrowserOnlyOnTheWeb(t *testing.T) {
	env := testEnv(t)
	for _, base := range []string{"file:///", "file:///root", "chrome://settings", "javascript:alert(1)", "127.0.0.1:8080", ""} {
		_, err := browserRun(context.Background(), map[string]any{"base_url": base, "scenario": "s.yaml"}, env)
		if code(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "base_url") {
			t.Errorf("%q: %v", base, err)
		}
	}
}

// TestFinalizeFollowsNoLink: run.finalize reads the log indexes steps
// left, beneath their folders: a tool's link to a file outside or to
// /dev/zero is not followed, a FIFO does not block it (found attacking
// issue 53: the worker grew by 600 MB a second).
func TestFinalizeFollowsNoLink(t *testing.T) {
	env := testEnv(t)
	secret := filepath.Join(t.TempDir(), "secret.json")
	os.WriteFile(secret, []byte(`{"issues":[{"severity":"HIGH","message":"LEAKED-FROM-OUTSIDE"}]}`), 0o600)
	for name, target := range map[string]string{"a": secret, "b": "/dev/zero"} {
		os.MkdirAll(filepath.Join(env.RunDir, "steps", name), 0o755)
		os.Symlink(target, filepath.Join(env.RunDir, "steps", name, IndexFile))
	}
	os.MkdirAll(filepath.Join(env.RunDir, "steps", "c"), 0o755)
	syscall.Mkfifo(filepath.Join(env.RunDir, "steps", "c", IndexFile), 0o600)
	done := make(chan error, 1)
	go func() {
		_, err := runFinalize(context.Background(), map[string]any{"status": "passed", "summary": "s"}, env)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run.finalize blocked or read without end")
	}
	if b, _ := os.ReadFile(filepath.Join(env.RunDir, "final.md")); strings.Contains(string(b), "LEAKED") {
		t.Fatalf("final.md quotes a file outside:\n%s", b)
	}
}
