package toolrun

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/asnobody"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/runtimekit"
	"github.com/capflow/capflow/internal/sandbox"
	"golang.org/x/sys/unix"
)

// The engine's record of what a step was given (records/<id>/input.json)
// is never the tool's to write: its stdin is a sealed copy (found
// attacking: reopened through /proc/self/fd/0, the record itself was the
// tool's where its user owned it, a worker that is not root).
func TestTheInputRecordIsNotTheToolsToWrite(t *testing.T) {
	m := script(t, `cat >/dev/null; (printf '{"n":666}' > /proc/self/fd/0) 2>/dev/null && echo rewrote >&2
(printf '{"n":666}' >> /dev/stdin) 2>/dev/null && echo appended >&2; echo '`+okEnvelope+`'`)
	run := t.TempDir()
	step, records := filepath.Join(run, "steps", "s1"), filepath.Join(run, "records", "s1")
	env := (&Runner{}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"n": 1}, RunID: "run1", StepID: "s1",
		Root: t.TempDir(), RunDir: run, Workdir: step, Records: records, Sandbox: sandbox.ModeRequired})
	got, _ := os.ReadFile(filepath.Join(records, InputFile))
	log, _ := os.ReadFile(filepath.Join(step, StderrLog))
	if !env.Success || string(got) != `{"n":1}` || len(log) > 0 {
		t.Fatalf("success %v (%s), the record %q, the tool's stderr %q: want it unchanged, every write refused", env.Success, env.Message, got, log)
	}
}

// A step's input naming a socket, a FIFO or a device does not bind it
// back from where the sandbox hides it (the machine's /tmp: an ssh-agent's,
// tmux's, X11's, a database's); a file or a folder is (found attacking).
func TestInputsBindNoHostSocket(t *testing.T) {
	dir := openTemp(t, "/tmp", "capflow-host-socket-") // in the hidden /tmp, as an agent's (not $TMPDIR: as nobody, $HOME)
	sock, file := filepath.Join(dir, "agent.1"), filepath.Join(dir, "given.txt")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.WriteFile(file, []byte("given"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, sock, file} {
		if err := os.Chmod(p, 0o777); err != nil { // any user's to reach: only the kind of file decides
			t.Fatal(err)
		}
	}
	m := script(t, `[ -e "$SOCK" ] && echo "the socket is there" >&2; [ "$(cat "$FILE")" = given ] || echo "no given file" >&2; cat >/dev/null; echo '`+okEnvelope+`'`)
	m.Entrypoint.Env = map[string]string{"SOCK": sock, "FILE": file}
	run := t.TempDir()
	step := filepath.Join(run, "steps", "s1")
	// The socket named, and its folder: a folder shows what its owner
	// makes in it, whenever (found attacking: an agent's folder).
	env := (&Runner{}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"sock": sock, "folder": dir, "file": file}, RunID: "run1",
		StepID: "s1", Root: t.TempDir(), RunDir: run, Workdir: step, Sandbox: sandbox.ModeRequired})
	log, _ := os.ReadFile(filepath.Join(step, StderrLog))
	if !env.Success || len(log) > 0 {
		t.Fatalf("success %v (%s), the tool's stderr %q: want the file bound, the socket not", env.Success, env.Message, log)
	}
}

// A file an input names is bound by the handle the worker took when it
// looked, never found again by its name: a folder on its path swapped
// for a link meanwhile (by anyone who may write where it lies: /tmp)
// bound what the look refused (found attacking: another run's folder as
// root, the worker's home as another user).
func TestAGivenFileIsBoundByItsHandle(t *testing.T) {
	base := openTemp(t, "/tmp", "capflow-swap-")
	shut := filepath.Join(base, "runs") // another run's folder: no input names it
	r := &Runner{Private: []string{shut}}
	for dir, content := range map[string]string{filepath.Join(shut, "other"): "SECRET", filepath.Join(base, "flip", "d"): "decoy"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "key"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, spare := filepath.Join(base, "flip", "d"), filepath.Join(base, "flip", "spare")
	if err := os.Symlink(filepath.Join(shut, "other"), spare); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, spare, unix.RENAME_EXCHANGE)
			}
		}
	}()
	named := filepath.Join(d, "key")
	m := script(t, `cat >/dev/null; cat "$FILE" >&2 2>/dev/null; echo '`+okEnvelope+`'`)
	m.Entrypoint.Env = map[string]string{"FILE": named}
	for i := range 150 {
		run := t.TempDir()
		step := filepath.Join(run, "steps", "s1")
		_ = r.Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"p": named}, RunID: "run1", StepID: "s1",
			Root: t.TempDir(), RunDir: run, Workdir: step, Sandbox: sandbox.ModeRequired})
		if log, _ := os.ReadFile(filepath.Join(step, StderrLog)); strings.Contains(string(log), "SECRET") {
			t.Fatalf("attempt %d: the tool read another run's file through %s", i+1, named)
		}
	}
}

// An input naming what the sandbox hides (the ownership key, a Hide
// file) does not uncover it (found attacking: its bind came after the
// cover was left out).
func TestAnInputUncoversNothingHidden(t *testing.T) {
	dir := openTemp(t, "/tmp", "capflow-key-") // in a hidden folder, as a CI's key is
	key, hide, link := filepath.Join(dir, "ownership.key"), filepath.Join(dir, "hidden.txt"), filepath.Join(dir, "to-key")
	t.Setenv(runtimekit.OwnerKeyFile, key)
	for p, secret := range map[string]string{key: "KEYSECRET", hide: "HIDESECRET"} {
		if err := os.WriteFile(p, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(key, link); err != nil {
		t.Fatal(err)
	}
	m := script(t, `cat >/dev/null; cat "$KEY" "$HID" "$LINK" >&2 2>/dev/null; echo '`+okEnvelope+`'`)
	m.Entrypoint.Env = map[string]string{"KEY": key, "HID": hide, "LINK": link}
	run := t.TempDir()
	step := filepath.Join(run, "steps", "s1")
	env := (&Runner{Hide: []string{hide}}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"a": key, "b": hide, "c": link},
		RunID: "run1", StepID: "s1", Root: t.TempDir(), RunDir: run, Workdir: step, Sandbox: sandbox.ModeRequired})
	if log, _ := os.ReadFile(filepath.Join(step, StderrLog)); !env.Success || strings.Contains(string(log), "SECRET") {
		t.Fatalf("success %v (%s): the tool read what the sandbox hides: %q", env.Success, env.Message, log)
	}
}

// A file an input names in a Private folder is refused whatever way the
// folder's name is written: a runs folder configured through a link was
// compared by its name, the file by where it really is, and another
// run's file was bound in (found attacking).
func TestAPrivateFolderThroughALinkGivesNothing(t *testing.T) {
	base := openTemp(t, "/tmp", "capflow-private-link-")
	runs, link := filepath.Join(base, "disk", "runs"), filepath.Join(base, "capflow")
	if err := os.MkdirAll(filepath.Join(runs, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "disk"), link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(runs, "other", "input.json")
	if err := os.WriteFile(other, []byte("OTHER-RUN"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := script(t, `cat >/dev/null; cat "$FILE" >&2 2>/dev/null; echo '`+okEnvelope+`'`)
	m.Entrypoint.Env = map[string]string{"FILE": other}
	run := t.TempDir()
	step := filepath.Join(run, "steps", "s1")
	env := (&Runner{Private: []string{filepath.Join(link, "runs")}}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"p": other},
		RunID: "run1", StepID: "s1", Root: t.TempDir(), RunDir: run, Workdir: step, Sandbox: sandbox.ModeRequired})
	if log, _ := os.ReadFile(filepath.Join(step, StderrLog)); !env.Success || strings.Contains(string(log), "OTHER-RUN") {
		t.Fatalf("success %v (%s): the tool read another run's file: %q", env.Success, env.Message, log)
	}
}

// A project named through a link in a hidden folder ($HOME/proj to
// /data/proj, as $PWD keeps it) has its runs and state emptied where they
// really are: emptied by the link's name, they stayed in view (found
// attacking).
func TestAProjectThroughALinkKeepsItsRunsPrivate(t *testing.T) {
	base := openTemp(t, "/var/tmp", "capflow-project-link-")
	home, data := filepath.Join(base, "home"), filepath.Join(base, "data", "proj")
	other, state := filepath.Join(data, ".capflow", "runs", "other", "input.json"), filepath.Join(data, ".capflow", "state", "cache.json")
	for _, f := range []string{other, state} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("PRIVATE\n"), 0o644); err != nil {
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
	m := script(t, `cat >/dev/null; cat "$OTHER" "$STATE" >&2 2>/dev/null; echo '`+okEnvelope+`'`)
	m.Entrypoint.Env = map[string]string{"OTHER": other, "STATE": state}
	run := filepath.Join(link, ".capflow", "runs", "run1")
	step := filepath.Join(run, "steps", "s1")
	if err := os.MkdirAll(step, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Private: []string{filepath.Join(link, ".capflow", "state"), filepath.Join(link, ".capflow", "runs")}}
	env := r.Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"n": 1},
		RunID: "run1", StepID: "s1", Root: link, RunDir: run, Workdir: step, Sandbox: sandbox.ModeRequired})
	if log, _ := os.ReadFile(filepath.Join(step, StderrLog)); !env.Success || strings.Contains(string(log), "PRIVATE") {
		t.Fatalf("success %v (%s): the tool read another run's file or the engine's state: %q", env.Success, env.Message, log)
	}
}

// A project reached through a link (`cd ~/proj`, ~/proj a link; in a
// hidden folder or not) runs its steps: the tool works in the project,
// reads its input and writes its folder (found attacking: an empty
// working folder, or one bubblewrap could not bind).
func TestAProjectThroughALinkRuns(t *testing.T) {
	for _, where := range []string{"a home", "the machine"} {
		t.Run(where, func(t *testing.T) {
			base := openTemp(t, "/var/tmp", "capflow-project-link-")
			data, links := filepath.Join(base, "data", "proj"), base
			if where == "a home" {
				links = filepath.Join(base, "home")
				t.Setenv("HOME", links)
			}
			for _, d := range []string{data, links} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(data, "notes.txt"), []byte("PROJECT\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(links, "proj")
			if err := os.Symlink(data, link); err != nil {
				t.Fatal(err)
			}
			run := filepath.Join(link, ".capflow", "runs", "run1")
			step := filepath.Join(run, "steps", "s1")
			m := script(t, `cat "$CAPFLOW_INPUT_PATH" >/dev/null || exit 5; cat notes.txt >&2 || exit 6; echo made > "$CAPFLOW_WORKDIR/made" || exit 7; cat >/dev/null; echo '`+okEnvelope+`'`)
			// The project's own tool, named through the link as its folder
			// is (found attacking: its command was not found).
			own := filepath.Join(data, "tools", "t")
			if err := os.MkdirAll(own, 0o755); err != nil {
				t.Fatal(err)
			}
			body, _ := os.ReadFile(filepath.Join(m.Dir, "run.sh"))
			if err := os.WriteFile(filepath.Join(own, "run.sh"), body, 0o755); err != nil {
				t.Fatal(err)
			}
			m.Dir = filepath.Join(link, "tools", "t")
			r := &Runner{Private: []string{filepath.Join(link, ".capflow", "state"), filepath.Join(link, ".capflow", "runs")}}
			env := r.Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"n": 1}, RunID: "run1", StepID: "s1",
				Root: link, RunDir: run, Workdir: step, Records: filepath.Join(run, "records", "s1"), Sandbox: sandbox.ModeRequired})
			made, _ := os.ReadFile(filepath.Join(step, "made"))
			log, _ := os.ReadFile(filepath.Join(step, StderrLog))
			if !env.Success || string(made) != "made\n" || string(log) != "PROJECT\n" {
				t.Fatalf("success %v (%s), made %q, the tool's stderr %q", env.Success, env.Message, made, log)
			}
		})
	}
}

// A write: folder that holds what a trusted path leads to is refused:
// .capflow a link to var/capflow inside the project, write: [var] held
// every run and the engine's state, writable (found attacking).
func TestAWriteFolderHoldsNoTrustedPathThroughALink(t *testing.T) {
	proj := filepath.Join(openTemp(t, "/var/tmp", "capflow-write-link-"), "proj")
	store := filepath.Join(proj, "var", "capflow")
	for _, f := range []string{"runs/other/records/s1/input.json", "state/cache.json"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(store, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(store, f), []byte("PRIVATE\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("var/capflow", filepath.Join(proj, ".capflow")); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(proj, ".capflow", "runs", "run1")
	step := filepath.Join(run, "steps", "s1")
	m := script(t, `cat var/capflow/runs/other/records/s1/input.json >&2; echo WRITTEN > var/capflow/state/cache.json; cat >/dev/null; echo '`+okEnvelope+`'`,
		func(m *manifest.Manifest) { m.Sandbox = &manifest.Sandbox{Write: []string{"var"}} })
	r := &Runner{Private: []string{filepath.Join(proj, ".capflow", "state"), filepath.Join(proj, ".capflow", "runs")}}
	env := r.Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"n": 1}, RunID: "run1", StepID: "s1",
		Root: proj, RunDir: run, Workdir: step, Records: filepath.Join(run, "records", "s1"), Sandbox: sandbox.ModeRequired})
	state, _ := os.ReadFile(filepath.Join(store, "state", "cache.json"))
	if env.Success || !strings.Contains(env.Message, "which holds where .capflow leads") || string(state) != "PRIVATE\n" {
		t.Fatalf("success %v (%s), the state %q: want the write folder refused, the state untouched", env.Success, env.Message, state)
	}
}

// openTemp is a new folder in dir that any user may enter (a step user,
// nobody), removed when the test ends.
func openTemp(t *testing.T, dir, pattern string) string {
	t.Helper()
	d, err := os.MkdirTemp(dir, pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// The hostile tests again as nobody: a worker that is not root, whose
// steps are its own user's.
func TestToolHostileAsAnotherUser(t *testing.T) {
	if asnobody.Inside() || os.Geteuid() != 0 {
		t.Skip("this is the run as the other user")
	}
	tests := []string{"TestTheInputRecordIsNotTheToolsToWrite", "TestInputsBindNoHostSocket", "TestAGivenFileIsBoundByItsHandle", "TestAnInputUncoversNothingHidden",
		"TestAPrivateFolderThroughALinkGivesNothing", "TestAProjectThroughALinkKeepsItsRunsPrivate", "TestAProjectThroughALinkRuns",
		"TestAWriteFolderHoldsNoTrustedPathThroughALink"}
	out := asnobody.Run(t, tests)
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass as nobody:\n%s", name, out)
		}
	}
}
