package realpath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"real/sub", "conf"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"link": "real", "policy.yaml": "conf/policy.yaml", "loop": "loop", "far": "link/sub/gone",
		"dots": "deep/../x/policy.yaml", "deep": "real/sub"} {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"real/sub", "real/sub"},
		{"link/sub", "real/sub"},
		{"link/missing/file", "real/missing/file"}, // a missing end kept beneath
		{"policy.yaml", "conf/policy.yaml"},        // a link to nothing yet: where it would lead
		{"far", "real/sub/gone"},
		{"loop", "loop"},               // a loop leads nowhere: its own name
		{"link/../conf", "conf"},       // ".." from where link really is: real's parent
		{"dots", "real/x/policy.yaml"}, // a link to nothing yet with ".." after a link
	} {
		if got := Of(filepath.Join(dir, c.in)); got != filepath.Join(dir, c.want) {
			t.Errorf("Of(%s) = %s, want %s", c.in, got, filepath.Join(dir, c.want))
		}
	}
	if Of("") != "" {
		t.Error("Of of nothing")
	}
}

// Walk names each link the walk passes through: replacing one changes
// where the path leads.
func TestWalkNamesItsLinks(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"policy.yaml": "conf/current.yaml", "conf/current.yaml": "../releases/policy.yaml"} {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	real, links := Walk(filepath.Join(dir, "policy.yaml"))
	want := []string{filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "conf", "current.yaml")}
	if real != filepath.Join(dir, "releases", "policy.yaml") || strings.Join(links, " ") != strings.Join(want, " ") {
		t.Fatalf("Walk: %s %v, want %s %v", real, links, filepath.Join(dir, "releases", "policy.yaml"), want)
	}
}

// A walk past the limit names the link it stopped at too: replacing it
// would end the loop and make the path lead there (found reviewing).
func TestWalkNamesTheLinkAtTheLimit(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= maxLinks; i++ {
		if err := os.Symlink(fmt.Sprintf("l%d", i+1), filepath.Join(dir, fmt.Sprintf("l%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	real, links := Walk(filepath.Join(dir, "l0"))
	if real != filepath.Join(dir, "l0") || len(links) != maxLinks+1 || links[maxLinks] != filepath.Join(dir, fmt.Sprintf("l%d", maxLinks)) {
		t.Fatalf("Walk: %s, %d links ending %v", real, len(links), links[len(links)-1:])
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		p, root string
		want    bool
	}{{"/a/b", "/a", true}, {"/a", "/a", true}, {"/ab", "/a", false}, {"/a", "/", true}, {"/", "/", true}, {"/a", "/a/b", false}} {
		if got := Within(c.p, c.root); got != c.want {
			t.Errorf("Within(%s, %s) = %v", c.p, c.root, got)
		}
	}
}
