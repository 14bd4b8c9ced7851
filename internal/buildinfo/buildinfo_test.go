package buildinfo

import (
	"runtime/debug"
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
