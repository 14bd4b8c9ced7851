package toolrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
