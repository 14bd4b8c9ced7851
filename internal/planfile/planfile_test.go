package planfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Read opens a plan file through the project root's handle: a link
// that leads out of the project is refused even where no check by name
// came first (a link swapped in after InProject looked), and a file that
// is missing says where its path counts from.
func TestRead(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.yaml")
	os.WriteFile(secret, []byte("name: secret\n"), 0o644)
	os.MkdirAll(filepath.Join(root, "parts"), 0o755)
	os.WriteFile(filepath.Join(root, "parts", "ok.yaml"), []byte("name: ok\n"), 0o644)
	os.Symlink(secret, filepath.Join(root, "parts", "out.yaml"))
	os.Symlink("ok.yaml", filepath.Join(root, "parts", "in.yaml"))
	os.Symlink(outside, filepath.Join(root, "away"))
	os.Symlink(filepath.Join(root, "parts", "ok.yaml"), filepath.Join(root, "parts", "abs.yaml"))
	for _, c := range []struct{ rel, want string }{
		{"parts/ok.yaml", ""},
		{"parts/in.yaml", ""},  // a link inside the project is followed
		{"parts/abs.yaml", ""}, // an absolute one too
		{"parts/out.yaml", `file "parts/out.yaml" leads outside its folder`},
		{"away/secret.yaml", `file "away/secret.yaml" leads outside its folder`},
		{"../" + filepath.Base(outside) + "/secret.yaml", "leads outside its folder"},
		{"parts/none.yaml", `file "parts/none.yaml" does not exist; a plan's files are named from the project root, ` + root},
	} {
		data, err := Read(root, c.rel)
		switch {
		case c.want == "" && (err != nil || string(data) != "name: ok\n"):
			t.Errorf("%s: %q %v", c.rel, data, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %q %v, want %q", c.rel, data, err, c.want)
		}
	}
}
