package runtimekit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/asnobody"
	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// A confined server of a project reached through a link in a home
// ($HOME/proj to /data/proj) sees no other run and not the engine's
// state: its folders are bound where they really are, as the private
// ones are emptied (found attacking: by the link's name it saw both).
func TestAServerThroughALinkKeepsRunsPrivate(t *testing.T) {
	if why := sandbox.Probe().Missing(); why != "" {
		t.Fatalf("this machine cannot confine: %s", why)
	}
	base, err := os.MkdirTemp("/var/tmp", "capflow-server-link-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	home, data := filepath.Join(base, "home"), filepath.Join(base, "data", "proj")
	for _, f := range []string{".capflow/runs/other/input.json", ".capflow/state/cache.json"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(data, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, f), []byte("PRIVATE\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, "proj")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	run := filepath.Join(link, ".capflow", "runs", "r1")
	work := filepath.Join(run, "steps", "s")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	env := &builtin.Env{Root: link, RunDir: run, Workdir: work, Feedback: envelope.NewBuilder("t"), Sandbox: sandbox.ModeRequired,
		Private: []string{filepath.Join(link, ".capflow", "runs"), filepath.Join(link, ".capflow", "state")}}
	seen := filepath.Join(data, ".capflow", "runs", "r1", "steps", "s", "seen.txt") // its own folder, where it really is
	script := `cat "$1/.capflow/runs/other/input.json" "$1/.capflow/state/cache.json" "$3/.capflow/runs/other/input.json" > "$2" 2>&1; echo done >> "$2"`
	if _, err := start(t, env, map[string]any{"name": "d", "command": []any{"sh", "-c", script, "sh", link, seen, data}}); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for i := 0; i < 400 && !strings.Contains(string(b), "done"); i++ {
		time.Sleep(50 * time.Millisecond)
		b, _ = os.ReadFile(seen)
	}
	if !strings.Contains(string(b), "done") || strings.Contains(string(b), "PRIVATE") {
		t.Fatalf("the server wrote %q: want it run, and no other run's file or the engine's state read", b)
	}
}

// The same, a worker that is not root.
func TestAServerThroughALinkAsAnotherUser(t *testing.T) {
	if asnobody.Inside() || os.Geteuid() != 0 {
		t.Skip("this is the run as the other user")
	}
	if out := asnobody.Run(t, []string{"TestAServerThroughALinkKeepsRunsPrivate"}); !strings.Contains(out, "--- PASS: TestAServerThroughALinkKeepsRunsPrivate ") {
		t.Errorf("did not pass as nobody:\n%s", out)
	}
}

// A server started alone (tools run) keeps the configuration's protected
// list too: a write folder leading into a tools_dirs folder is refused
// (found attacking: only the manifest's list was checked).
func TestAServerAloneKeepsTheProtectedList(t *testing.T) {
	proj := t.TempDir()
	for _, d := range []string{"mytools/x", "out"} {
		if err := os.MkdirAll(filepath.Join(proj, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../mytools/x", filepath.Join(proj, "out", "mine")); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(proj, ".capflow", "runs", "r1")
	env := &builtin.Env{Root: proj, RunDir: run, Workdir: filepath.Join(run, "steps", "s"), Feedback: envelope.NewBuilder("t"), Sandbox: sandbox.ModeRequired,
		Confine: &manifest.Sandbox{Write: []string{"out/mine"}}, Protected: []string{"mytools"}}
	if _, err := start(t, env, map[string]any{"name": "d", "command": []any{"true"}}); err == nil || !strings.Contains(err.Error(), "trusts") {
		t.Fatalf("start: %v: want the write folder refused", err)
	}
}
