//go:build linux

// Package asnobody runs a test binary's own tests again as the user nobody
// (65534), for the hostile tests of a worker that is not root. Only tests
// import it.
package asnobody

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Env is set in the run as nobody: its tests run, the one that started it
// skips.
const Env = "CAPFLOW_TEST_AS_NOBODY"

// Inside reports whether this is the run as nobody.
func Inside() bool { return os.Getenv(Env) != "" }

// Run runs the named tests of this test binary as nobody, in a folder of
// their own (not t.TempDir: its parent is the test's alone, 0700), and
// returns their verbose output; a failure fails t. The caller must be
// root and not itself the run as nobody.
func Run(t *testing.T, tests []string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "capflow-as-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^("+strings.Join(tests, "|")+")$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + dir, "HOME=" + dir, Env + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests as nobody: %v\n%s", err, out)
	}
	return string(out)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
