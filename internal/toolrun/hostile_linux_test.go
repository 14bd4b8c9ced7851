package toolrun

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/asnobody"
	"github.com/capflow/capflow/internal/sandbox"
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
	dir, err := os.MkdirTemp("/tmp", "capflow-host-socket-") // in the hidden /tmp, as an agent's (not $TMPDIR: as nobody, $HOME)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
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
	env := (&Runner{}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{"sock": sock, "file": file}, RunID: "run1",
		StepID: "s1", Root: t.TempDir(), RunDir: run, Workdir: step, Sandbox: sandbox.ModeRequired})
	log, _ := os.ReadFile(filepath.Join(step, StderrLog))
	if !env.Success || len(log) > 0 {
		t.Fatalf("success %v (%s), the tool's stderr %q: want the file bound, the socket not", env.Success, env.Message, log)
	}
}

// The hostile tests again as nobody: a worker that is not root, whose
// steps are its own user's.
func TestToolHostileAsAnotherUser(t *testing.T) {
	if asnobody.Inside() || os.Geteuid() != 0 {
		t.Skip("this is the run as the other user")
	}
	tests := []string{"TestTheInputRecordIsNotTheToolsToWrite", "TestInputsBindNoHostSocket"}
	out := asnobody.Run(t, tests)
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass as nobody:\n%s", name, out)
		}
	}
}
