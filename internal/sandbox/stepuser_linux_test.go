package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A root worker's steps forked by the zygote run as nobody (uid 65534),
// not as root: the machine's root-only files are not theirs to read, as
// they are not another user's worker's, even where a manifest's read: or
// an input binds them in. What the run gave them as its own stays
// theirs (a root-only file of their project, though the project's folder
// is root's alone and in no hidden root), their /tmp is theirs to write,
// and what they write in their step folder is its owner's on disk.
func TestRootWorkersStepsRunAsNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the worker is not root: its steps are its own user, in a user namespace (TestHostileAsAnotherUser)")
	}
	secret := filepath.Join(mkdirIn(t, "/var/tmp", 0o700), "secret")
	bound := mkdirIn(t, "/tmp", 0o700) // in a hidden root: bound back when read
	boundSecret := filepath.Join(bound, "secret")
	project := mkdirIn(t, "/var/tmp", 0o700) // outside every hidden root
	step := filepath.Join(project, "step")
	for _, f := range []struct {
		path string
		perm os.FileMode
	}{{secret, 0o600}, {boundSecret, 0o600}, {filepath.Join(project, "own.txt"), 0o600}} {
		if err := os.WriteFile(f.path, []byte("root only\n"), f.perm); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(step, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `id -u; id -g
cat ` + secret + ` 2>/dev/null || echo "refused the machine's"
cat ` + boundSecret + ` 2>/dev/null || echo "refused the bound one"
cat ` + filepath.Join(project, "own.txt") + `
echo made > "$STEP/new" && echo wrote the step folder
echo t > /tmp/t && echo wrote /tmp`
	// The secret's folder bound too, as a manifest's read: or an input
	// naming it binds it: bound, but not the run's own.
	spec := Defaults
	spec.Read = []string{bound}
	o := runWith(t, Request{Spec: spec, Own: []string{project}}, step, script)
	want := "65534\n65534\nrefused the machine's\nrefused the bound one\nroot only\nwrote the step folder\nwrote /tmp\n"
	if o.exit != 0 || o.out != want {
		t.Fatalf("exit %d:\n%s\nwant:\n%s", o.exit, o.out, want)
	}
	st, err := os.Stat(filepath.Join(step, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 0 || sys.Gid != 0 {
		t.Fatalf("the step's file is %d:%d on disk, not its folder's owner's (0:0)", sys.Uid, sys.Gid)
	}
	if sum := support(t).Summary(); !strings.Contains(sum, "steps forked by capflow's zygote as nobody") {
		t.Fatalf("the worker's start-up line does not say so: %s", sum)
	}
}

// mkdirIn makes a folder of mode perm in dir, removed when the test ends.
func mkdirIn(t *testing.T, dir string, perm os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp(dir, "capflow-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, perm); err != nil {
		t.Fatal(err)
	}
	return d
}
