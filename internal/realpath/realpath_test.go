package realpath

import (
	"os"
	"path/filepath"
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
	for link, to := range map[string]string{"link": "real", "policy.yaml": "conf/policy.yaml", "loop": "loop", "far": "link/sub/gone"} {
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
		{"loop", "loop"}, // a loop leads nowhere: its own name
	} {
		if got := Of(filepath.Join(dir, c.in)); got != filepath.Join(dir, c.want) {
			t.Errorf("Of(%s) = %s, want %s", c.in, got, filepath.Join(dir, c.want))
		}
	}
	if Of("") != "" {
		t.Error("Of of nothing")
	}
}
