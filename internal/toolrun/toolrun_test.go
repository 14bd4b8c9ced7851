package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
)

// script writes an executable shell tool into a fresh folder and returns
// its manifest. The scripts are real subprocesses, as in production.
func script(t *testing.T, body string, mutate ...func(*manifest.Manifest)) *manifest.Manifest {
	t.Helper()
	dir := t.TempDir()
	// Outside any project: a root worker's step reads it as any user does
	// (ownFolders), and the test's folders are root's alone.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Name: "t", Version: "1.0.0", Dir: dir,
		Entrypoint:   manifest.Entrypoint{Type: manifest.EntryCommand, Command: []string{"./run.sh"}, Result: manifest.ResultEnvelope},
		InputSchema:  map[string]any{"type": "object"},
		OutputSchema: map[string]any{"type": "object", "required": []any{"n"}, "properties": map[string]any{"n": map[string]any{"type": "integer"}}}}
	for _, f := range mutate {
		f(m)
	}
	return m
}

const okEnvelope = `{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:00Z","message":"ok","feedback":[],"data":{"n":1}}`

func run(t *testing.T, m *manifest.Manifest, in map[string]any, ctxTimeout time.Duration) envelope.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ctxTimeout)
	defer cancel()
	r := &Runner{Grace: 300 * time.Millisecond, MaxStdout: 64 << 10}
	wd := filepath.Join(t.TempDir(), "step")
	env := r.Run(ctx, Request{Manifest: m, Inputs: in, RunID: "run1", StepID: "s1", Root: t.TempDir(), Workdir: wd,
		Secrets: map[string]string{"TOKEN": "hunter2-secret"}})
	if errs := envelope.Validate(&env); len(errs) > 0 {
		t.Fatalf("runner produced an invalid envelope %+v: %v", env, errs)
	}
	return env
}

func TestCommandProtocol(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		mutate   func(*manifest.Manifest)
		timeout  time.Duration
		success  bool
		code     caperr.Code
		exit     int
		contains string // in message or feedback
	}{
		{"envelope to output file", `cat > /dev/null; echo '` + okEnvelope + `' > "$CAPFLOW_OUTPUT_PATH"`, nil, 5 * time.Second, true, "", 0, "ok"},
		{"envelope as last stdout JSON", `echo "log line {not json"; echo '` + okEnvelope + `'`, nil, 5 * time.Second, true, "", 0, "ok"},
		{"inputs on stdin and in a file", `read -r line; test "$line" = '{"n":5}' && test "$(cat $CAPFLOW_INPUT_PATH)" = '{"n":5}' && test "$CAPFLOW_STEP_ID" = s1 && test "$TOOLS_OUTPUT_JSON" = 1 && echo '` + okEnvelope + `'`, nil, 5 * time.Second, true, "", 0, "ok"},
		{"garbage output", `echo 'garbage \x00 ]]'; echo 'oops' >&2; exit 0`, nil, 5 * time.Second, false, caperr.ToolFailure, 1, "without a result envelope"},
		{"a silent failure says so", `exit 1`, nil, 5 * time.Second, false, caperr.ToolFailure, 1, "exited 1 and wrote nothing to stdout or stderr (no result envelope)"},
		{"crash with stderr tail", `echo 'panic: boom' >&2; exit 3`, nil, 5 * time.Second, false, caperr.ToolFailure, 3, "panic: boom"},
		{"exit 0 with success=false", `echo '{"toolId":"t","exitCode":4,"success":false,"timestamp":"2026-11-21T10:00:00Z","message":"disk full","feedback":[{"phase":"w","level":"error","message":"disk full","timestamp":"2026-11-21T10:00:00Z"}],"error":{"code":"TEST_FAILURE","severity":"HIGH","retryable":false}}'`, nil, 5 * time.Second, false, caperr.TestFailure, 4, "disk full"},
		{"invalid envelope", `echo '{"toolId":"t","exitCode":1,"success":true,"timestamp":"x","message":"","feedback":[]}'`, nil, 5 * time.Second, false, caperr.ToolFailure, 1, "invalid envelope"},
		{"output schema violation", `echo '{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:00Z","message":"ok","feedback":[],"data":{"n":"x"}}'`, nil, 5 * time.Second, false, caperr.SchemaViolation, 2, "n: must be integer"},
		{"hang is stopped", `sleep 30`, nil, 500 * time.Millisecond, false, caperr.TaskTimeout, 1, "timed out"},
		{"SIGTERM ignored, SIGKILL follows", `trap '' TERM; sleep 30 & wait; sleep 30`, nil, 500 * time.Millisecond, false, caperr.TaskTimeout, 1, "timed out"},
		{"exit_code mode success", `echo hi`, func(m *manifest.Manifest) { m.Entrypoint.Result = manifest.ResultExitCode; m.OutputSchema = nil }, 5 * time.Second, true, "", 0, "exited 0"},
		{"exit_code mode failure", `exit 7`, func(m *manifest.Manifest) { m.Entrypoint.Result = manifest.ResultExitCode; m.OutputSchema = nil }, 5 * time.Second, false, caperr.ToolFailure, 7, "exited 7"},
		{"huge stdout is capped", `head -c 3000000 /dev/zero | tr '\0' 'x'; echo '` + okEnvelope + `' > "$CAPFLOW_OUTPUT_PATH"`, nil, 10 * time.Second, true, "", 0, "bytes dropped"},
		{"secret is redacted", `echo '{"toolId":"t","exitCode":1,"success":false,"timestamp":"2026-11-21T10:00:00Z","message":"bad token '$TOKEN'","feedback":[{"phase":"a","level":"error","message":"'$TOKEN'","timestamp":"2026-11-21T10:00:00Z"}]}'`, func(m *manifest.Manifest) { m.Secrets = []string{"TOKEN"} }, 5 * time.Second, false, caperr.ToolFailure, 1, envelope.Mask},
		{"missing binary", ``, func(m *manifest.Manifest) { m.Entrypoint.Command = []string{"capflow-no-such-binary"} }, 5 * time.Second, false, caperr.StartupError, 1, "cannot start"},
		{"input schema violation", ``, func(m *manifest.Manifest) {
			m.InputSchema = map[string]any{"type": "object", "required": []any{"path"}}
		}, 5 * time.Second, false, caperr.SchemaViolation, 2, "missing required field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mut []func(*manifest.Manifest)
			if tt.mutate != nil {
				mut = append(mut, tt.mutate)
			}
			start := time.Now()
			env := run(t, script(t, tt.body, mut...), map[string]any{"n": 5}, tt.timeout)
			if env.Success != tt.success {
				t.Fatalf("success = %v, want %v: %+v", env.Success, tt.success, env)
			}
			if !tt.success && (env.Error == nil || env.Error.Code != tt.code) {
				t.Fatalf("error = %+v, want %s (%s)", env.Error, tt.code, env.Message)
			}
			if env.ExitCode != tt.exit {
				t.Fatalf("exitCode = %d, want %d", env.ExitCode, tt.exit)
			}
			all, _ := json.Marshal(env)
			if !strings.Contains(string(all), tt.contains) {
				t.Fatalf("envelope does not mention %q: %s", tt.contains, all)
			}
			if strings.Contains(string(all), "hunter2-secret") {
				t.Fatalf("secret leaked: %s", all)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %s: the process group was not stopped", time.Since(start))
			}
		})
	}
}

func TestStderrEventsBecomeFeedback(t *testing.T) {
	t.Parallel()
	m := script(t, `echo '{"phase":"download","level":"info","message":"50%"}' >&2; echo 'plain log' >&2; echo '`+okEnvelope+`'`)
	var live []envelope.Feedback
	r := &Runner{}
	wd := filepath.Join(t.TempDir(), "s")
	env := r.Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{}, Workdir: wd, Root: t.TempDir(),
		OnFeedback: func(f envelope.Feedback) { live = append(live, f) }})
	if !env.Success || len(live) != 1 || live[0].Message != "50%" {
		t.Fatalf("live events = %+v, env = %+v", live, env)
	}
	// The live events, and the line saying how the tool was confined.
	if f := env.Feedback; len(f) != 2 || f[0].Phase != "sandbox" || !strings.HasPrefix(f[0].Message, SandboxWayPrefix) || f[1].Phase != "download" {
		t.Fatalf("envelope without feedback should take the live events: %+v", env.Feedback)
	}
	log, _ := os.ReadFile(filepath.Join(wd, StderrLog))
	if strings.TrimSpace(string(log)) != "plain log" {
		t.Fatalf("stderr log = %q", log)
	}
}

// A tool that writes nothing to stdout or stderr leaves no log files; an
// attempt's logs never pass for a later attempt's that wrote nothing.
func TestLogFilesOnlyWhenWritten(t *testing.T) {
	t.Parallel()
	wd := filepath.Join(t.TempDir(), "s")
	noisy := script(t, `echo out; echo err >&2; echo '`+okEnvelope+`' > "$CAPFLOW_OUTPUT_PATH"`)
	quiet := script(t, `echo '`+okEnvelope+`' > "$CAPFLOW_OUTPUT_PATH"`)
	for i, tc := range []struct {
		m      *manifest.Manifest
		stdout string
		stderr string
	}{{noisy, "out\n", "err\n"}, {quiet, "", ""}} {
		env := (&Runner{}).Run(context.Background(), Request{Manifest: tc.m, Inputs: map[string]any{}, Workdir: wd, Root: t.TempDir(), Attempt: i + 1})
		if !env.Success {
			t.Fatalf("attempt %d: %+v", i+1, env)
		}
		for name, want := range map[string]string{StdoutLog: tc.stdout, StderrLog: tc.stderr} {
			b, err := os.ReadFile(filepath.Join(wd, name))
			switch {
			case want == "" && !errors.Is(err, os.ErrNotExist):
				t.Errorf("attempt %d: %s exists (%q, %v), want none", i+1, name, b, err)
			case want != "" && string(b) != want:
				t.Errorf("attempt %d: %s = %q (%v), want %q", i+1, name, b, err, want)
			}
		}
	}
}

// The step's logs are created by the worker, with its rights, after the
// tool started: a link the tool put in their place is never followed.
func TestLogFilesRefuseLinks(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	m := script(t, `ln -s "$OUT/err-target" "$CAPFLOW_WORKDIR/stderr.log"; ln -s "$OUT/out-target" "$CAPFLOW_WORKDIR/stdout.log"
echo to-stderr >&2; echo to-stdout; echo '`+okEnvelope+`' > "$CAPFLOW_OUTPUT_PATH"`,
		func(m *manifest.Manifest) { m.Entrypoint.Env = map[string]string{"OUT": outside} })
	wd := filepath.Join(t.TempDir(), "s")
	env := (&Runner{}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{}, Workdir: wd, Root: t.TempDir()})
	if !env.Success {
		t.Fatalf("%+v", env)
	}
	for _, f := range []string{"err-target", "out-target"} {
		if _, err := os.Lstat(filepath.Join(outside, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the worker wrote through the tool's link to %s: %v", f, err)
		}
	}
}

// A tool that writes feedback of its own and progress events on stderr
// keeps both, in time order, each once; a flood of events is bounded.
func TestOwnFeedbackKeepsStderrEvents(t *testing.T) {
	t.Parallel()
	own := `{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:05Z","message":"ok","data":{"n":1},` +
		`"feedback":[{"phase":"start","level":"info","message":"begin","timestamp":"2026-11-21T10:00:00Z"},` +
		`{"phase":"dl","level":"info","message":"50%","timestamp":"2026-11-21T10:00:02Z"},` +
		`{"phase":"end","level":"info","message":"done","timestamp":"2026-11-21T10:00:04Z"}]}`
	m := script(t, `echo '{"phase":"dl","level":"info","message":"50%","timestamp":"2026-11-21T10:00:02Z"}' >&2
echo '{"phase":"dl","level":"info","message":"90%","timestamp":"2026-11-21T10:00:03Z"}' >&2
echo '`+own+`'`)
	env := run(t, m, map[string]any{}, 10*time.Second)
	var got []string
	for _, f := range env.Feedback {
		if f.Phase != "sandbox" {
			got = append(got, f.Message)
		}
	}
	if strings.Join(got, ",") != "begin,50%,90%,done" || len(env.Feedback) != 5 {
		t.Fatalf("feedback %v (%d entries, one the sandbox's)", got, len(env.Feedback))
	}
	flood := script(t, `i=0; while [ $i -lt 1000 ]; do echo '{"phase":"p","level":"info","message":"tick '$i'"}' >&2; i=$((i+1)); done; echo '`+okEnvelope+`'`)
	env = run(t, flood, map[string]any{}, 30*time.Second)
	last := env.Feedback[len(env.Feedback)-1].Message
	if len(env.Feedback) > maxEvents+1 || last != "tick 999" || !strings.Contains(fmt.Sprint(env.Feedback), "dropped") {
		t.Fatalf("%d entries, last %q", len(env.Feedback), last)
	}
}

func TestBuiltinThroughRunner(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("abc"), 0o644)
	m := &manifest.Manifest{Name: "file-checksum", Version: "1.0.0", Entrypoint: manifest.Entrypoint{Type: manifest.EntryBuiltin, Name: "file.checksum"},
		OutputSchema: map[string]any{"type": "object", "required": []any{"sha256"}}}
	env := (&Runner{}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"path": "a.txt"}, Root: root})
	if !env.Success || env.Data.(map[string]any)["sha256"] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("%+v", env)
	}
	env = (&Runner{}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"path": "/etc/passwd"}, Root: root})
	if env.Success || env.Error.Code != caperr.InvalidInput || !strings.Contains(env.Message, "outside the project root") {
		t.Fatalf("path escape not refused: %+v", env)
	}
}

func TestSecretsStayOutOfStepFiles(t *testing.T) {
	t.Parallel()
	m := script(t, `echo "stdout $TOKEN"; echo "stderr $TOKEN" >&2; printf '{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:00Z","message":"m","feedback":[],"data":{"n":1,"s":"%s"}}' "$TOKEN" > "$CAPFLOW_OUTPUT_PATH"`,
		func(m *manifest.Manifest) { m.Secrets = []string{"TOKEN"} })
	wd := filepath.Join(t.TempDir(), "step")
	env := (&Runner{}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{}, Root: t.TempDir(), Workdir: wd,
		Secrets: map[string]string{"TOKEN": "hunter2-secret"}})
	if !env.Success {
		t.Fatalf("%+v", env)
	}
	for _, f := range []string{StdoutLog, StderrLog, OutputFile} {
		b, err := os.ReadFile(filepath.Join(wd, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "hunter2-secret") || !strings.Contains(string(b), envelope.Mask) {
			t.Errorf("%s: %q", f, b)
		}
	}
}

func TestHostileCommandTools(t *testing.T) {
	t.Parallel()
	t.Run("setsid child holds stdout and stderr", func(t *testing.T) {
		t.Parallel()
		m := script(t, "setsid sleep 30 &\necho '"+okEnvelope+"' > \"$CAPFLOW_OUTPUT_PATH\"\n")
		start := time.Now()
		env := run(t, m, nil, 20*time.Second)
		if !env.Success {
			t.Fatalf("want success, got %+v", env)
		}
		if d := time.Since(start); d > 8*time.Second {
			t.Fatalf("capflow waited %s for a child it does not own", d)
		}
	})
	t.Run("output file linked to /dev/zero", func(t *testing.T) {
		t.Parallel()
		m := script(t, "ln -sf /dev/zero \"$CAPFLOW_OUTPUT_PATH\"\nexit 0\n")
		env := run(t, m, nil, 20*time.Second)
		if env.Success || env.Error.Code != caperr.ToolFailure || !strings.Contains(env.Message, "not a regular file") {
			t.Fatalf("want TOOL_FAILURE for a device as output, got %+v", env)
		}
	})
	t.Run("huge output file", func(t *testing.T) {
		t.Parallel()
		m := script(t, "head -c 200000 /dev/zero > \"$CAPFLOW_OUTPUT_PATH\"\nexit 0\n")
		env := run(t, m, nil, 20*time.Second)
		if env.Success || env.Error.Code != caperr.ToolFailure || !strings.Contains(env.Message, "more than") {
			t.Fatalf("want TOOL_FAILURE for an oversized output file, got %+v", env)
		}
	})
}

func TestSecretsInEveryForm(t *testing.T) {
	t.Parallel()
	m := script(t, `echo '{"phase":"p","level":"info","message":"escaped \u0068unter2-secret"}' >&2
printf '%s\n' "$PEM" >&2
echo "{\"toolId\":\"t\",\"exitCode\":0,\"success\":true,\"timestamp\":\"2026-11-21T10:00:00Z\",\"message\":\"ok\",\"feedback\":[],\"data\":{\"n\":$NUM_TOKEN,\"s\":\"x\"}}" > "$CAPFLOW_OUTPUT_PATH"
`, func(m *manifest.Manifest) {
		m.OutputSchema = map[string]any{"type": "object"}
	})
	var live []envelope.Feedback
	pem := "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----"
	wd := filepath.Join(t.TempDir(), "step")
	env := (&Runner{Grace: time.Second}).Run(context.Background(), Request{Manifest: m, Root: t.TempDir(), Workdir: wd,
		Secrets:    map[string]string{"TOKEN": "hunter2-secret", "NUM_TOKEN": "987654321987", "PEM": pem},
		OnFeedback: func(f envelope.Feedback) { live = append(live, f) }})
	b, _ := json.Marshal(env)
	lb, _ := json.Marshal(live)
	logs, _ := os.ReadFile(filepath.Join(wd, StderrLog))
	for _, s := range []string{"hunter2-secret", "987654321987", "MIIBOgIBAAJBAKj34GkxFhD9"} {
		for where, text := range map[string]string{"envelope": string(b), "live events": string(lb), "stderr log": string(logs)} {
			if strings.Contains(text, s) {
				t.Errorf("%s leaks %q: %s", where, s, text)
			}
		}
	}
	if !env.Success {
		t.Fatalf("tool failed: %+v", env)
	}
}

func TestPassEnv(t *testing.T) {
	environ := []string{"RCLONE_CONFIG=/etc/r.conf", "RCLONE_CONFIG_GDRIVE_TYPE=drive", "RCLONE_CONFIGX=1", "SECRET=x", "RCLONE_VERBOSE=1"}
	got := passEnv([]string{"RCLONE_CONFIG", "RCLONE_CONFIG_*"}, environ)
	if strings.Join(got, " ") != "RCLONE_CONFIG=/etc/r.conf RCLONE_CONFIG_GDRIVE_TYPE=drive" {
		t.Fatalf("passEnv: %v", got)
	}
	if passEnv(nil, environ) != nil {
		t.Fatal("nothing named, nothing passed")
	}
}

// A failure's code is a contract code: none is TOOL_FAILURE (retried as
// the table says); one capflow does not know is TOOL_FAILURE not retried,
// the tool's code named.
func TestFailureCodes(t *testing.T) {
	t.Parallel()
	fail := func(errJSON string) string {
		return `{"toolId":"t","exitCode":1,"success":false,"timestamp":"2026-11-21T10:00:00Z","message":"no","feedback":[{"phase":"p","level":"error","message":"no","timestamp":"2026-11-21T10:00:00Z"}]` + errJSON + `}`
	}
	for _, c := range []struct {
		name, err string
		code      caperr.Code
		retryable bool
		msg       string
	}{
		{"known", `,"error":{"code":"TASK_TIMEOUT","severity":"HIGH","retryable":true}`, caperr.TaskTimeout, true, "no"},
		{"none", ``, caperr.ToolFailure, true, "no"},
		{"unknown", `,"error":{"code":"DISK_ON_FIRE","severity":"HIGH","retryable":true}`, caperr.ToolFailure, false, `no (the tool's error code "DISK_ON_FIRE" is not a contract code: TOOL_FAILURE, final)`},
	} {
		env := run(t, script(t, `echo '`+fail(c.err)+`'; exit 1`), map[string]any{}, 10*time.Second)
		if env.Error == nil || env.Error.Code != c.code || env.Error.Retryable != c.retryable || env.Message != c.msg {
			t.Errorf("%s: %+v %q", c.name, env.Error, env.Message)
		}
	}
}

// TestDataNoReaderKeeps: a number past float64 and data nested past
// envelope.MaxDataDepth are the tool's failure, the field named
// (hostile findings at 6003afe, 20 and 22), never stored as null or
// handed to readers that break on them.
func TestDataNoReaderKeeps(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, 9000) + "1" + strings.Repeat("}", 9000)
	for _, c := range []struct{ data, want string }{
		{`{"n":1e400}`, "data /n: 1e400 is not a number a JSON reader keeps"},
		{`{"n":1,"x":` + deep + `}`, "data /x/a/a"},
	} {
		env := run(t, script(t, `cat > "$CAPFLOW_OUTPUT_PATH" <<'EOF2'
{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:00Z","message":"ok","feedback":[],"data":`+c.data+`}
EOF2
`), nil, 10*time.Second)
		if env.Success || env.Error.Code != caperr.ToolFailure || !strings.Contains(env.Message, c.want) {
			t.Errorf("%.30s: %s %+v", c.data, env.Message, env.Error)
		}
	}
}

// TestSeverityFromTheTable: a tool's error with no severity gets its
// code's from the table, never an empty one (issue 54).
func TestSeverityFromTheTable(t *testing.T) {
	t.Parallel()
	env := run(t, script(t, `echo '{"toolId":"t","exitCode":1,"success":false,"timestamp":"2026-11-21T10:00:00Z","message":"no db","feedback":[{"phase":"run","level":"error","message":"no db","timestamp":"2026-11-21T10:00:00Z"}],"error":{"code":"DEPENDENCY_UNAVAILABLE"}}'; exit 1`), nil, 10*time.Second)
	if env.Error == nil || env.Error.Code != caperr.DependencyUnavailable || env.Error.Severity != caperr.High {
		t.Fatalf("%+v", env.Error)
	}
}
