package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

func TestFindProject(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "plans", "examples")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, found, err := FindProject(deep); found || got != deep || err != nil {
		t.Fatalf("no capflow.yaml anywhere above: %s %v, want %s false", got, found, deep)
	}
	// A folder named capflow.yaml is no configuration.
	if err := os.Mkdir(filepath.Join(deep, FileName), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, FileName), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, filepath.Join(root, "plans"), deep} {
		if got, found, err := FindProject(dir); !found || got != root || err != nil {
			t.Errorf("from %s: %s %v, want %s", dir, got, found, root)
		}
	}
}

// TestFindProjectTrustsOnlyItsOwner: a capflow.yaml found that another
// user owns, or in a folder others may write, is refused with how to
// trust it (hostile findings at 6003afe, 6); CAPFLOW_TRUSTED_DIRS trusts it.
func TestFindProjectTrustsOnlyItsOwner(t *testing.T) {
	shared := t.TempDir()
	os.Chmod(shared, 0o777|os.ModeSticky)
	victim := filepath.Join(shared, "victim")
	os.Mkdir(victim, 0o755)
	file := filepath.Join(shared, FileName)
	os.WriteFile(file, []byte("tools_dirs: [evil-tools]\n"), 0o644)
	_, found, err := FindProject(victim)
	if !found || caperr.CodeOf(err) != caperr.ConfigError || !strings.Contains(err.Error(), "is in a folder others may write") ||
		!strings.Contains(err.Error(), "--project "+shared) || !strings.Contains(err.Error(), TrustedDirsEnv) {
		t.Fatalf("a world-writable folder's file: %v", err)
	}
	t.Setenv(TrustedDirsEnv, shared)
	if root, _, err := FindProject(victim); err != nil || root != shared {
		t.Fatalf("trusted: %s %v", root, err)
	}
	t.Setenv(TrustedDirsEnv, "")
	os.Chmod(shared, 0o755)
	if os.Geteuid() == 0 {
		// Another user's file in root's own folder.
		os.Chown(file, 4242, 4242)
		if _, _, err := FindProject(victim); err == nil || !strings.Contains(err.Error(), "owned by uid 4242") {
			t.Fatalf("another user's file: %v", err)
		}
		os.Chown(file, 0, 0)
	}
	if _, _, err := FindProject(victim); err != nil {
		t.Fatalf("the user's own file: %v", err)
	}
}
