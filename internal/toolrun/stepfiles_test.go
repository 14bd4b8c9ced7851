package toolrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// A tool that swaps its step folder's path for a link to another folder
// moves nothing the worker reads or writes: the result is read, and the
// logs written, beneath the step folder's handle, taken before the tool
// started (an unconfined tool; confined, the step folder is a mount point).
func TestStepFilesStayBeneathTheHandle(t *testing.T) {
	t.Parallel()
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, OutputFile), []byte(strings.Replace(okEnvelope, `"n":1`, `"n":2`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	m := script(t, `echo '`+okEnvelope+`' > "$CAPFLOW_OUTPUT_PATH"
mv "$CAPFLOW_WORKDIR" "$CAPFLOW_WORKDIR.was" && ln -s "$OTHER" "$CAPFLOW_WORKDIR" || exit 9
echo to-stderr >&2; echo to-stdout`,
		func(m *manifest.Manifest) { m.Entrypoint.Env = map[string]string{"OTHER": other} })
	wd := filepath.Join(t.TempDir(), "s")
	env := (&Runner{}).Run(context.Background(), Request{Manifest: m, Inputs: map[string]any{}, Workdir: wd, Root: t.TempDir(), Sandbox: sandbox.ModeOff})
	if d, _ := env.Data.(map[string]any); !env.Success || d["n"] != float64(1) {
		t.Fatalf("want the result written before the swap (n 1): %+v", env)
	}
	for _, f := range []string{StdoutLog, StderrLog} {
		if _, err := os.Lstat(filepath.Join(other, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the worker wrote %s in the folder swapped in: %v", f, err)
		}
	}
	for f, want := range map[string]string{StdoutLog: "to-stdout\n", StderrLog: "to-stderr\n"} {
		if b, err := os.ReadFile(filepath.Join(wd+".was", f)); string(b) != want || err != nil {
			t.Errorf("%s in the step folder = %q (%v), want %q", f, b, err, want)
		}
	}
}

// What an attempt's tool leaves in place of its input file (a hard link
// to a file elsewhere, a FIFO) is removed before the next attempt's input
// is written: never written through, never waited on (found reviewing
// this change: the worker overwrote the linked file, or hung).
func TestTheNextInputFileIsNewEachAttempt(t *testing.T) {
	t.Parallel()
	for name, plant := range map[string]string{
		"a hard link": `ln "$VICTIM" "$CAPFLOW_INPUT_PATH"`,
		"a FIFO":      `mkfifo "$CAPFLOW_INPUT_PATH"`,
	} {
		victim := filepath.Join(t.TempDir(), "victim")
		if err := os.WriteFile(victim, []byte("untouched"), 0o600); err != nil {
			t.Fatal(err)
		}
		m := script(t, `in=$(cat); rm -f "$CAPFLOW_INPUT_PATH" && `+plant+` || exit 9
echo '`+okEnvelope+`' > "$CAPFLOW_OUTPUT_PATH"`,
			func(m *manifest.Manifest) { m.Entrypoint.Env = map[string]string{"VICTIM": victim} })
		wd := filepath.Join(t.TempDir(), "s")
		for attempt := 1; attempt <= 2; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			env := (&Runner{}).Run(ctx, Request{Manifest: m, Inputs: map[string]any{"k": "INPUTDATA"}, Workdir: wd, Root: t.TempDir(), Sandbox: sandbox.ModeOff, Attempt: attempt})
			cancel()
			if !env.Success {
				t.Fatalf("%s, attempt %d: %+v", name, attempt, env)
			}
		}
		if b, _ := os.ReadFile(victim); string(b) != "untouched" {
			t.Errorf("%s: the worker wrote the input through it: %q", name, b)
		}
	}
}
