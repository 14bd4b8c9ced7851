package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNoSetIDPlants: a tool cannot leave a set-uid or set-gid file in its
// folders, which on the host (outside the sandbox's nosuid mounts) would
// run as the worker's user for anyone (a helper's attack on the zygote
// planted a set-uid root copy of id, both ways). Every call that sets a
// mode refuses those bits; plain modes and opening without creating are
// untouched.
func TestNoSetIDPlants(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		step := t.TempDir()
		legacy := ""
		if len(legacyModeCalls) > 0 {
			legacy = fmt.Sprintf(`
call("chmod", %d, b"f", 0o4755)
call("open-create", %d, b"h", os.O_CREAT | os.O_WRONLY, 0o6755)
call("creat", %d, b"i", 0o4755)`, unix.SYS_CHMOD, unix.SYS_OPEN, unix.SYS_CREAT)
		}
		o := run(t, Defaults, step, fmt.Sprintf(`cd "$STEP" && python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *a):
    ctypes.set_errno(0)
    r = libc.syscall(*a)
    print(name, -1 if r < 0 else 0, ctypes.get_errno())
open("f", "w").close()
fd = os.open("f", os.O_RDONLY)
call("fchmod", %d, fd, 0o4755)
call("fchmodat", %d, -100, b"f", 0o2755, 0)
call("fchmodat2", %d, -100, b"f", 0o4755, 0)
call("openat-create", %d, -100, b"g", os.O_CREAT | os.O_WRONLY, 0o4755)
call("mknodat", %d, -100, b"j", 0o100000 | 0o4755, 0)
call("openat2", %d, -100, b"k", 0, 0)%s
call("chmod-plain", %d, -100, b"f", 0o755, 0)
call("open-junk-mode", %d, -100, b"f", os.O_RDONLY, 0o4755)
'`, unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2, unix.SYS_OPENAT, unix.SYS_MKNODAT, unix.SYS_OPENAT2, legacy, unix.SYS_FCHMODAT, unix.SYS_OPENAT))
		want := []string{"fchmod -1 1\n", "fchmodat -1 1\n", "fchmodat2 -1 1\n", "openat-create -1 1\n", "mknodat -1 1\n",
			"openat2 -1 38\n", "chmod-plain 0 0\n", "open-junk-mode 0 0\n"}
		if legacy != "" {
			want = append(want, "chmod -1 1\n", "open-create -1 1\n", "creat -1 1\n")
		}
		for _, w := range want {
			if !strings.Contains(o.out, w) {
				t.Errorf("missing %q in\n%s", w, o.out)
			}
		}
		fi, err := os.Stat(filepath.Join(step, "f"))
		if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("f on the host: %v %v", fi.Mode(), err)
		}
		for _, name := range []string{"g", "h", "i", "j", "k"} {
			if _, err := os.Stat(filepath.Join(step, name)); err == nil {
				t.Errorf("%s was created", name)
			}
		}
	})
}
