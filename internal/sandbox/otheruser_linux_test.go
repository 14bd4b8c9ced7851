package sandbox

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// otherUserEnv marks the test binary run again as another user.
const otherUserEnv = "CAPFLOW_SANDBOX_TEST_OTHER_USER"

// The hostile tests again as another user (nobody): a worker that is not
// root has a zygote in a user namespace of its own and no cgroups (it may
// not make them under root's), so the one zygote without cgroups forks its
// steps. Both ways must hold what they hold for root.
func TestHostileAsAnotherUser(t *testing.T) {
	if os.Getenv(otherUserEnv) != "" {
		t.Skip("this is the run as the other user")
	}
	if os.Geteuid() != 0 {
		t.Skip("the suite runs as another user already: its own run is this test")
	}
	// Not t.TempDir: its parent folder is the test's alone (0700).
	dir, err := os.MkdirTemp("", "capflow-other-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	copyFile(t, os.Args[0], bin)
	// (TestHostSocketsAreHidden makes its socket in /run: root's alone.)
	hostile := []string{"TestWritesOnlyInTheStepFolder", "TestNoNetworkButItsOwnLoopback", "TestNothingOutlivesTheStep",
		"TestKernelSettingsAreReadOnly", "TestWriteFoldersAvoidWhatTheEngineTrusts",
		"TestNoKeyringNoNamespaces", "TestNoSetIDPlants", "TestOtherRunsAreNotSeen", "TestZygoteFindings", "TestWriteFoldersByHandle",
		"TestTerminateAsksTheToolFirst"}
	zygoteOnly := []string{"TestTheStepsMountsGoWithIt"}
	cmd := exec.Command(bin, "-test.run", "^("+strings.Join(append(hostile, zygoteOnly...), "|")+")$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + dir, "HOME=" + dir, otherUserEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the hostile tests as nobody: %v\n%s", err, out)
	}
	for _, name := range hostile {
		for _, w := range []string{WayZygote, WayBubblewrap} {
			if !strings.Contains(string(out), "--- PASS: "+name+"/"+w+" ") {
				t.Errorf("%s/%s did not pass as nobody:\n%s", name, w, out)
			}
		}
	}
	for _, name := range zygoteOnly {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass as nobody:\n%s", name, out)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
