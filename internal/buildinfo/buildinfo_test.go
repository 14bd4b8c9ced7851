package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestStampAndRevision(t *testing.T) {
	for _, c := range []struct {
		name     string
		settings []debug.BuildSetting
		line     string
		changed  bool
	}{
		{"none", nil, "(devel)", false},
		{"clean", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}, "(devel) abc123 false", false},
		{"changed", []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}, "(devel) abc123 true", true},
	} {
		s := stampOf(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: c.settings})
		if s.line() != c.line || (s.modified == "true") != c.changed {
			t.Errorf("%s: stamp %q modified %q, want %q %v", c.name, s.line(), s.modified, c.line, c.changed)
		}
	}
	if (stamp{}).line() != "" {
		t.Error("no build information: a stamp")
	}
}

// The content ID is what the Go tool reads from the binary; a file that
// is not an ELF executable has none.
func TestContentID(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSpace(string(out)), "/")
	if got, want := ContentID(), parts[len(parts)-1]; got != want || len(got) < 20 {
		t.Fatalf("content ID %q, want %q (go tool buildid: %s)", got, want, out)
	}
	text := filepath.Join(t.TempDir(), "not-elf")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := contentIDOf(text); got != "" {
		t.Fatalf("a script's content ID %q, want none", got)
	}
}
