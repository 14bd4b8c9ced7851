package toolrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/kitcache"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/realpath"
	"github.com/capflow/capflow/internal/sandbox"
)

func runWith(t *testing.T, r *Runner, m *manifest.Manifest, mode sandbox.Mode) envelope.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.Run(ctx, Request{Manifest: m, RunID: "run1", StepID: "s1", Root: t.TempDir(),
		Workdir: filepath.Join(t.TempDir(), "step"), Sandbox: mode})
}

func warnings(env envelope.Envelope) string {
	var out []string
	for _, f := range env.Feedback {
		if f.Phase == "sandbox" {
			out = append(out, f.Level+": "+f.Message)
		}
	}
	return strings.Join(out, "\n")
}

// The policy decides what happens where the machine cannot confine.
func TestSandboxPolicyModes(t *testing.T) {
	ok := "echo '" + okEnvelope + "'"
	none := &Runner{Support: sandbox.Unavailable("bubblewrap (bwrap) is not installed")}
	t.Run("required refuses", func(t *testing.T) {
		env := runWith(t, none, script(t, ok), sandbox.ModeRequired)
		if env.Success || env.Error.Code != caperr.ConfigError || !strings.Contains(env.Message, "sandbox: required") || !strings.Contains(env.Message, "bwrap") {
			t.Fatalf("%+v", env)
		}
	})
	t.Run("default warns", func(t *testing.T) {
		env := runWith(t, none, script(t, ok), sandbox.ModeDefault)
		if !env.Success || warnings(env) != "warning: ran unconfined (policy sandbox: default): bubblewrap (bwrap) is not installed" {
			t.Fatalf("%+v\n%s", env, warnings(env))
		}
	})
	t.Run("off is silent", func(t *testing.T) {
		env := runWith(t, none, script(t, ok), sandbox.ModeOff)
		if !env.Success || warnings(env) != "" {
			t.Fatalf("%+v", env)
		}
	})
}

// A tool that passes a limit fails RESOURCE_EXHAUSTED naming it.
func TestResourceExhausted(t *testing.T) {
	if why := sandbox.Probe().Missing(); why != "" {
		t.Fatalf("this machine cannot confine: %s", why)
	}
	tests := []struct {
		name, body string
		box        manifest.Sandbox
		want       string
	}{
		{"memory", "python3 -c 'b = bytearray(400 << 20)'", manifest.Sandbox{Memory: 64 << 20}, "passed its memory limit (64MiB"},
		{"pids", "for i in $(seq 30); do sleep 20 & done; wait", manifest.Sandbox{Pids: 10}, "passed its pids limit (10"},
		{"file size", `head -c 300000 /dev/zero > "$CAPFLOW_WORKDIR/big"; echo '` + okEnvelope + `'`, manifest.Sandbox{FileSize: 100000}, "passed its file_size limit (97.7KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			box := tt.box
			env := runWith(t, &Runner{}, script(t, tt.body, func(m *manifest.Manifest) { m.Sandbox = &box }), sandbox.ModeDefault)
			if env.Success || env.Error.Code != caperr.ResourceExhausted || !strings.Contains(env.Message, tt.want) {
				t.Fatalf("want RESOURCE_EXHAUSTED %q, got %+v %+v", tt.want, env, env.Error)
			}
		})
	}
}

// TestInputsOpenNoPrivateFolder: a path a step's inputs name is bound
// into the sandbox where it is hidden, but never another run's folder,
// the engine's state or a home (found attacking issue 53: a plan read
// another run's report and /root through a tool's input).
func TestInputsOpenNoPrivateFolder(t *testing.T) {
	if why := sandbox.Probe().Missing(); why != "" {
		t.Fatalf("this machine cannot confine: %s", why)
	}
	project := t.TempDir()
	runs := filepath.Join(project, ".capflow", "runs")
	mine, other := filepath.Join(runs, "mine"), filepath.Join(runs, "other")
	for _, d := range []string{filepath.Join(mine, "steps", "s"), other} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(other, "report.md"), []byte("OTHER-RUN"), 0o644)
	os.WriteFile(filepath.Join(mine, "report.md"), []byte("MY-RUN"), 0o644)
	given := filepath.Join(t.TempDir(), "given.txt") // in /tmp: a step may be given it
	os.WriteFile(given, []byte("GIVEN"), 0o644)
	m := script(t, `for p in "$A" "$B" "$C"; do cat "$p" 2>/dev/null || echo -n "-"; echo; done`, func(m *manifest.Manifest) {
		m.Entrypoint.Result = manifest.ResultExitCode
		m.Entrypoint.Env = map[string]string{"A": filepath.Join(other, "report.md"), "B": filepath.Join(mine, "report.md"), "C": given}
	})
	r := &Runner{Private: []string{runs, filepath.Join(project, ".capflow", "state")}}
	env := r.Run(context.Background(), Request{Manifest: m, RunID: "mine", StepID: "s", Root: project, RunDir: mine,
		Workdir: filepath.Join(mine, "steps", "s"), Sandbox: sandbox.ModeRequired,
		Inputs: map[string]any{"a": filepath.Join(other, "report.md"), "b": filepath.Join(mine, "report.md"), "c": given}})
	d, _ := env.Data.(map[string]any)
	if out := fmt.Sprint(d["stdout"]); out != "-\nMY-RUN\nGIVEN\n" {
		t.Fatalf("%q (%s)", out, env.Message)
	}
}

// The folder holding a tool's folder is a root worker's step's own only in
// the project or capflow's kit cache: a tools folder linked out of the
// project (`tools -> ..`) or configured at a system folder would give the
// step what lies there as its own (found attacking issue 57).
func TestOwnFoldersStayInTheProject(t *testing.T) {
	kits, err := kitcache.Root()
	if err != nil {
		t.Fatal(err)
	}
	kits = realpath.Of(kits)
	project, run := "/srv/p", "/srv/p/.capflow/runs/r"
	for _, tc := range []struct {
		tools string
		own   bool
	}{
		{"/srv/p/tools", true},
		{"/srv/p", true},
		{filepath.Join(kits, "core"), true},
		{"/srv", false}, // tools -> ..
		{"/var", false}, // tools_dirs: [/var]
		{"/srv/p-other/tools", false},
		{"", false},
	} {
		got := ownFolders(project, run, tc.tools)
		if want := 2 + map[bool]int{true: 1}[tc.own]; len(got) != want || got[0] != project || got[1] != run {
			t.Errorf("tools in %q: own %v, want the project, the run and that folder: %v", tc.tools, got, tc.own)
		}
	}
}
