package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFindProject(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "plans", "examples")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, found := FindProject(deep); found || got != deep {
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
		if got, found := FindProject(dir); !found || got != root {
			t.Errorf("from %s: %s %v, want %s", dir, got, found, root)
		}
	}
}
