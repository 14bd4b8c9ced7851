package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A project reached through a link whose tools_dirs name the real path
// still protects them (found attacking: compared as text, they were
// dropped, and a write folder could hold them).
func TestProtectedWhereTheProjectReallyIs(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data", "proj")
	if err := os.MkdirAll(filepath.Join(data, "mytools"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "proj")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	c := &Config{Root: link, ToolsDirs: []string{filepath.Join(data, "mytools")}}
	if got := c.Protected(); !slices.Contains(got, "mytools") {
		t.Fatalf("Protected %q: want mytools", got)
	}
}
