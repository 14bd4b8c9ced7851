package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// capflow init makes a project whose example plan is ready, keeps what
// the folder already holds, and refuses a folder that is a project.
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "Data & Tools!")
	os.MkdirAll(filepath.Join(dir, "plans"), 0o755)
	os.WriteFile(filepath.Join(dir, "plans", "hello.yaml"), []byte("mine\n"), 0o644)
	code, out, _ := capflow(t, "init", dir, "--output", "json")
	env := envelopeOf(t, out)
	made, _ := env.Data.(map[string]any)
	if code != 0 || made["task_queue"] != "data-tools" || fmt.Sprint(made["files"]) != "[capflow.yaml .gitignore tools/]" {
		t.Fatalf("init: exit %d %s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "plans", "hello.yaml")); string(b) != "mine\n" {
		t.Fatalf("the folder's own plan was replaced: %q", b)
	}
	if cfg, _ := os.ReadFile(filepath.Join(dir, "capflow.yaml")); !strings.Contains(string(cfg), `task_queue: "data-tools" `) {
		t.Fatalf("capflow.yaml:\n%s", cfg)
	}
	if code, out, _ = capflow(t, "init", "--project", dir, "--output", "json"); code != 2 || !strings.Contains(out, "is already a capflow project (it has capflow.yaml): nothing was written") {
		t.Fatalf("init again: exit %d %s", code, out)
	}
	fresh := t.TempDir()
	if code, out, _ = capflow(t, "init", fresh, "--output", "json"); code != 0 {
		t.Fatalf("init: %s", out)
	}
	if code, out, _ = capflow(t, "plan", "check", filepath.Join(fresh, "plans", "hello.yaml"), "--project", fresh, "--output", "json"); code != 0 {
		t.Fatalf("the example plan is not ready: exit %d %s", code, out)
	}
}
