package registry

import (
	"path/filepath"
	"testing"
)

// A capability only a broken manifest declares is a tool to mend, not
// one to write: Resolve names that file, read fresh and from the cache
// (a trial scaffolded a second tool beside one whose manifest was only
// broken).
func TestALeftOutManifestIsNamed(t *testing.T) {
	root := t.TempDir()
	writeTool(t, filepath.Join(root, "tools"), "mend-me", "x", "e.f, g.h", "")
	writeTool(t, filepath.Join(root, "tools"), "fine", "1.0.0", "g.h", "")
	o := opts(root, "core")
	for _, from := range []string{"fresh", "cache"} {
		r, err := Load(o)
		if err != nil {
			t.Fatal(err)
		}
		want := `no tool provides e.f: tools/mend-me/tool.yaml declares it but is left out for its problems, first tools/mend-me/tool.yaml:2:1: version: version "x" is not semver (MAJOR.MINOR.PATCH, e.g. 1.2.0) (capflow tools validate names them all; fix it, then check again)`
		if _, err := r.Resolve("e.f", ""); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", from, err, want)
		}
		// A capability another tool provides resolves to it as before.
		if res, err := r.Resolve("g.h", ""); err != nil || res.Chosen.Name != "fine" {
			t.Errorf("%s: g.h resolved to %+v, %v", from, res, err)
		}
		if got := r.LeftOut["g.h"]; len(got) != 1 || got[0] != "tools/mend-me/tool.yaml" {
			t.Errorf("%s: left out for g.h: %q", from, got)
		}
	}
}
