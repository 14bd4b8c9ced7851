package sandbox

// The sandbox's hostile cases on kernel settings, write folders, orphans,
// keyrings and other runs (sandbox_linux_test.go has the helpers).

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capflow/capflow/internal/manifest"
)

// A read-only bind does not stop a connect: the host's sockets (in /run,
// in the homes) are hidden, not merely read-only.
func TestHostSocketsAreHidden(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		home, _ := os.UserHomeDir()
		for _, dir := range []string{"/run", home} {
			d, err := os.MkdirTemp(dir, "capflow-sock-")
			if err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			defer os.RemoveAll(d)
			sock := filepath.Join(d, "s.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				for c, err := l.Accept(); err == nil; c, err = l.Accept() {
					c.Write([]byte("hello"))
					c.Close()
				}
			}()
			probe := fmt.Sprintf(`python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); print("open" if s.connect_ex(%q) == 0 else "hidden")'`, sock)
			if o := run(t, Defaults, t.TempDir(), probe); strings.TrimSpace(o.out) != "hidden" {
				t.Fatalf("a confined tool reached %s: %q", sock, o.out)
			}
		}
	})
}

func TestRebindNeverUndoesAHiddenRoot(t *testing.T) {
	hidden := []string{"/tmp", "/root"}
	got := rebind([]string{"/tmp", "/", "/root/.pyenv/shims", "/root", "/tmp/p", "/usr/bin", "/root/.pyenv", "/tmp/p"}, hidden)
	if strings.Join(got, " ") != "/tmp/p /root/.pyenv" {
		t.Fatalf("rebind (each once, none inside another): %v", got)
	}
	if got := toolchains([]string{"/root/.pyenv/shims", "/usr/bin"}); strings.Join(got, " ") != "/root/.pyenv/shims /root/.pyenv /usr/bin" {
		t.Fatalf("toolchains: %v", got)
	}
}

// A hidden path costs a mount only where a bind above it would show it.
func TestHideOnlyWhatABindUncovers(t *testing.T) {
	dir := t.TempDir()
	if !covered(dir, hiddenRoots()) {
		t.Fatalf("a test's folder %s is not under a hidden root (TMPDIR set?)", dir)
	}
	key := filepath.Join(dir, "keys", "ownership.key")
	if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := support(t)
	for _, c := range []struct {
		req  Request
		want int
	}{
		{Request{Write: []string{filepath.Join(dir, "step")}, Hide: []string{key}}, 0},
		{Request{Read: []string{filepath.Join(dir, "keys")}, Hide: []string{key}}, 1},
		{Request{Write: []string{dir}, Hide: []string{key}}, 1},
	} {
		args := s.mountArgs(c.req)
		if n := strings.Count(strings.Join(args, " "), "/dev/null "+key); n != c.want {
			t.Errorf("%+v: %d mounts over the key, want %d: %v", c.req, n, c.want, args)
		}
	}
}

// TestKernelSettingsAreReadOnly: no confined tool writes a sysctl, a root
// worker's included (the hostile audit's H3: kernel.core_pattern, then a
// crash, is code as root on the host). Each value is written back as it
// is, so the test changes nothing where it would fail.
func TestKernelSettingsAreReadOnly(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		step := t.TempDir()
		// /proc/irq and /proc/bus too: root may write interrupt routing
		// there (found attacking the zygote, which covered only /proc/sys).
		o := run(t, Defaults, step, `for k in sys/vm/swappiness sys/kernel/core_pattern sys/kernel/panic irq/default_smp_affinity; do
  if cat /proc/$k > /proc/$k 2>/dev/null; then echo "WROTE $k"; else echo "refused $k"; fi
done
n=$(find /proc/bus /proc/irq -type f -writable 2>/dev/null | wc -l); echo "writable $n"
for d in fs acpi scsi asound; do [ -d /proc/$d ] && awk -v d=/proc/$d '$5 == d { split($6, o, ","); print d, o[1] }' /proc/self/mountinfo; done`)
		for _, k := range []string{"refused sys/vm/swappiness", "refused sys/kernel/core_pattern", "refused sys/kernel/panic", "refused irq/default_smp_affinity", "writable 0\n"} {
			if !strings.Contains(o.out, k) {
				t.Fatalf("a confined tool (euid %d): not %q:\n%s", os.Geteuid(), k, o.out)
			}
		}
		// Where the host has them, the folders some hosts keep root-writable
		// files in that check no capability (an attack's finding; container
		// runtimes mask them): bound read-only for a root worker.
		for _, d := range []string{"/proc/fs", "/proc/acpi", "/proc/scsi", "/proc/asound"} {
			if _, err := os.Stat(d); err == nil && os.Geteuid() == 0 && !strings.Contains(o.out, d+" ro\n") {
				t.Errorf("%s is not bound read-only:\n%s", d, o.out)
			}
		}
	})
}

// TestKernelSettingsAreReadOnlyForOtherUsers: a worker that is not root
// binds nothing over /proc/sys (two mounts a step saved): its tools still
// write no sysctl. Run as root, the test runs the sandbox's bubblewrap
// line for such a worker as nobody; run as another user, that is what
// TestKernelSettingsAreReadOnly did.
func TestKernelSettingsAreReadOnlyForOtherUsers(t *testing.T) {
	s := support(t)
	script := `for k in vm/swappiness kernel/core_pattern kernel/panic; do
  if cat /proc/sys/$k > /proc/sys/$k 2>/dev/null; then echo "WROTE $k"; else echo "refused $k"; fi
done
if echo h > /proc/sysrq-trigger 2>/dev/null; then echo "WROTE sysrq"; else echo "refused sysrq"; fi`
	req := Request{Argv: []string{"/bin/sh", "-c", script}}
	for euid, binds := range map[int]bool{0: true, 65534: false} {
		if got := strings.Contains(strings.Join(s.bwrapArgsAs(req, euid), " "), "--ro-bind /proc/sys /proc/sys"); got != binds {
			t.Fatalf("a worker of euid %d binds /proc/sys read-only: %v, want %v", euid, got, binds)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: TestKernelSettingsAreReadOnly ran this worker's own sandbox")
	}
	args := s.bwrapArgsAs(req, 65534)
	// Without the info and block pipes: nothing waits on a handshake here.
	if !slices.Equal(args[:5], []string{"bwrap", "--info-fd", "3", "--block-fd", "4"}) {
		t.Fatalf("bubblewrap's line begins %v", args[:5])
	}
	cmd := exec.Command(s.bwrap, args[5:]...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the sandbox as nobody: %v\n%s", err, out)
	}
	for _, k := range []string{"vm/swappiness", "kernel/core_pattern", "kernel/panic", "sysrq"} {
		if !strings.Contains(string(out), "refused "+k) {
			t.Fatalf("a confined tool of a worker that is not root wrote %s:\n%s", k, out)
		}
	}
}

// TestWriteFoldersAvoidWhatTheEngineTrusts: a write folder that is, or
// leads through a link to, the state folder, the tools or the
// configuration is refused when the tool starts (M3; tools validate
// refuses the plain names, this the links).
func TestWriteFoldersAvoidWhatTheEngineTrusts(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		project := projectWith(t, ".capflow/state", "tools/x", "out")
		os.Symlink(".capflow", filepath.Join(project, "innocent"))
		os.Symlink("../tools/x", filepath.Join(project, "out", "tool"))
		for _, w := range []string{"innocent", "innocent/state", "out/tool"} {
			if _, _, err := SpecFor(&manifest.Sandbox{Write: []string{w}}, project); err == nil || !strings.Contains(err.Error(), "no tool writes what the engine trusts") {
				t.Errorf("write %s: %v", w, err)
			}
		}
		if s, _, err := SpecFor(&manifest.Sandbox{Write: []string{"out"}}, project); err != nil || len(s.Write) != 1 {
			t.Fatalf("write out: %v %+v", err, s)
		}
		// A folder the configuration trusts (tools_dirs: [mytools]), reached
		// through a link.
		os.MkdirAll(filepath.Join(project, "mytools", "x"), 0o755)
		os.Symlink("../mytools/x", filepath.Join(project, "out", "mine"))
		if _, _, err := SpecFor(&manifest.Sandbox{Write: []string{"out/mine"}}, project, "mytools"); err == nil || !strings.Contains(err.Error(), "holds mytools") {
			t.Fatalf("write out/mine: %v", err)
		}
	})
}

// TestOrphansOfADeadWorkerAreSwept: a sandbox whose worker is gone (the
// hostile audit's M1: bubblewrap's init outlived a SIGKILLed worker,
// outside every cgroup) is killed by the next worker's sweep; one of a
// live worker, or of no worker, is left alone.
func TestOrphansOfADeadWorkerAreSwept(t *testing.T) {
	if o := run(t, Defaults, t.TempDir(), `echo "mark=$CAPFLOW_SANDBOX_WORKER"`); workerMark() == "" || !strings.Contains(o.out, "mark="+workerMark()) {
		t.Fatalf("a step's sandbox does not carry its worker's mark %q: %s", workerMark(), o.out)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	start := func(mark string) *exec.Cmd {
		c := exec.Command("sleep", "60")
		c.Env = []string{"PATH=/usr/bin:/bin"}
		if mark != "" {
			c.Env = append(c.Env, WorkerEnv+"="+mark)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	orphan := start(fmt.Sprintf("%s.%d.%d", machineTag(), gone.Process.Pid, 12345))
	live := start(workerMark())
	unmarked := start("")
	foreign := start(fmt.Sprintf("0123456789abcdef.%d.1", gone.Process.Pid))
	// Other tests' leftovers on the machine may be swept too: what counts
	// is the orphan, and none of the others here.
	swept := SweepOrphans()
	if !slices.Contains(swept, orphan.Process.Pid) {
		t.Fatalf("swept %v, not the orphan %d", swept, orphan.Process.Pid)
	}
	_ = orphan.Wait()
	for _, c := range []*exec.Cmd{live, unmarked, foreign} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("a process not orphaned was killed: %v", err)
		}
	}
}

// holds reports whether cg is idle in the pool.
func (p *cgroupPool) holds(cg *cgroup) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.idle, cg)
}

// TestNoKeyringNoNamespaces: whatever the worker's uid (CI runs as root),
// a confined tool can neither read nor plant keys in the host's keyrings
// (hostile findings at 6003afe, 5), load BPF, open perf events nor make
// namespaces of its own.
func TestNoKeyringNoNamespaces(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		id, err := unix.AddKey("user", "capflow-probe", []byte("SECRET"), unix.KEY_SPEC_USER_KEYRING)
		if err != nil {
			t.Fatalf("the test's own key: %v", err)
		}
		defer unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0)
		planted := fmt.Sprintf("capflow-planted-%d", time.Now().UnixNano())
		script := fmt.Sprintf(`python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *a):
    r = libc.syscall(*a)
    print(name, r, ctypes.get_errno())
call("search", %d, 10, -4, b"user", b"capflow-probe", 0)
call("add", %d, b"user", b"%s", b"x", 1, -4)
call("bpf", %d, 0, 0, 0)
call("perf", %d, 0, 0, -1, -1, 0)
call("unshare", %d, 0x10000000)
call("clone", %d, 0x10000000 | 17, 0, 0, 0, 0)
call("clone3", %d, 0, 0)
call("getpid", %d)
call("ptrace", %d, 16, 1, 0, 0)
try:
    print("keys", len(open("/proc/keys").read()))
except OSError:
    print("keys 0")
'`, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, planted, unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_UNSHARE, unix.SYS_CLONE, unix.SYS_CLONE3, unix.SYS_GETPID, unix.SYS_PTRACE)
		o := run(t, Defaults, t.TempDir(), script)
		for _, want := range []string{"search -1 1\n", "add -1 1\n", "bpf -1 1\n", "perf -1 1\n", "unshare -1 1\n", "clone -1 1\n", "clone3 -1 38\n", "ptrace -1 1\n", "keys 0\n"} {
			if !strings.Contains(o.out, want) {
				t.Errorf("missing %q in\n%s", want, o.out)
			}
		}
		if strings.Contains(o.out, "getpid -1") || !strings.Contains(o.out, "getpid ") {
			t.Errorf("an allowed call failed:\n%s", o.out)
		}
		if _, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", planted, 0); err == nil {
			t.Error("the tool planted a key in the host's keyring")
		}
	})
}

// TestInitKeepsItsSocket: a tool with the network cannot take its init's
// control socket (the worker's side of its proxy and ports): the init is
// not dumpable and pidfd_getfd is refused.
func TestInitKeepsItsSocket(t *testing.T) {
	withNet := Defaults
	withNet.Network = true
	script := fmt.Sprintf(`python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
try:
    print("fd", os.readlink("/proc/2/fd/%d"))
except Exception as e:
    print("fd refused", type(e).__name__)
pfd = os.pidfd_open(2)
r = libc.syscall(%d, pfd, %d, 0)
print("getfd", r, ctypes.get_errno())
'`, ctlFD, unix.SYS_PIDFD_GETFD, ctlFD)
	o := runWith(t, Request{Spec: withNet}, t.TempDir(), script)
	if !strings.Contains(o.out, "fd refused PermissionError") || !strings.Contains(o.out, "getfd -1 1\n") {
		t.Fatalf("%s", o.out)
	}
}

// TestOtherRunsAreNotSeen: a tree sees the project, but of its private
// folders (the runs folder, the engine's state) only its own run (found
// attacking issue 53: a server read another run's inputs).
func TestOtherRunsAreNotSeen(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		project := t.TempDir()
		runs := filepath.Join(project, ".capflow", "runs")
		mine, other := filepath.Join(runs, "mine"), filepath.Join(runs, "other")
		step := filepath.Join(mine, "steps", "s")
		for _, d := range []string{step, other} {
			os.MkdirAll(d, 0o755)
		}
		os.WriteFile(filepath.Join(other, "input.json"), []byte("OTHER-RUN"), 0o644)
		os.WriteFile(filepath.Join(mine, "input.json"), []byte("MY-RUN"), 0o644)
		os.WriteFile(filepath.Join(project, "plan.yaml"), []byte("PROJECT"), 0o644)
		s := support(t)
		var out bytes.Buffer
		tree := startWay(t, s, Request{Argv: []string{"/bin/sh", "-c", fmt.Sprintf("cat %q %q; cat %q 2>&1; echo done > %q/out", filepath.Join(project, "plan.yaml"), filepath.Join(mine, "input.json"), filepath.Join(other, "input.json"), step)},
			Dir: step, Read: []string{project, mine}, Write: []string{step}, Private: []string{runs}, Env: []string{"PATH=/usr/bin:/bin"}, Spec: Defaults},
			Stdio{Out: &out, Err: &out})
		exit, _ := tree.Wait()
		tree.Finish(exit, "")
		if !strings.HasPrefix(out.String(), "PROJECTMY-RUN") || strings.Contains(out.String(), "OTHER-RUN") || !strings.Contains(out.String(), "No such file") {
			t.Fatalf("%q", out.String())
		}
		if b, _ := os.ReadFile(filepath.Join(step, "out")); string(b) != "done\n" {
			t.Fatalf("its step folder: %q", b)
		}
	})
}

// projectWith is a temporary project folder holding the folders dirs.
func projectWith(t *testing.T, dirs ...string) string {
	t.Helper()
	project := t.TempDir()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(project, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return project
}

// Only the worker's own PATH folders are bound back from a hidden folder:
// a tool's env: PATH names what it runs, not what it may see (found
// attacking: a manifest's PATH bound a folder behind a root-only one).
func TestOnlyTheWorkersPathIsBoundBack(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		theirs, ours := mkdirIn(t, "/tmp", 0o755), mkdirIn(t, "/tmp", 0o755) // in the hidden /tmp
		for _, d := range []string{theirs, ours} {
			if err := os.WriteFile(filepath.Join(d, "here"), []byte("here\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("PATH", os.Getenv("PATH")+":"+ours)
		step := t.TempDir()
		req := Request{Spec: Defaults, Argv: []string{"/bin/sh", "-c", `cat "$THEIRS/here" "$OURS/here" 2>&1`}, Dir: step,
			Read: []string{filepath.Dir(step)}, Own: []string{filepath.Dir(step)}, Write: []string{step},
			Env: []string{"PATH=/usr/bin:/bin:" + theirs + ":" + ours, "THEIRS=" + theirs, "OURS=" + ours}}
		o := runAsIs(t, support(t), req)
		if got := o.out; !strings.Contains(got, "No such file") || strings.Count(got, "here\n") != 1 || !strings.HasSuffix(got, "here\n") {
			t.Fatalf("%q: want the worker's PATH folder bound and the tool's own not", got)
		}
	})
}

// Only the given files that are bound are handed to a tree: bubblewrap
// passes a handle no option names on to the tool, which reopened one
// writable through /proc/self/fd and wrote outside its view (found
// attacking: a root tool under bubblewrap, a file standing for
// /etc/passwd).
func TestAGivenFileNotBoundIsNotHandedOver(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		file := filepath.Join(mkdirIn(t, "/var/tmp", 0o755), "passwd") // outside every hidden folder: not bound
		if err := os.WriteFile(file, []byte("root\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		step := t.TempDir()
		o := runWith(t, Request{Spec: Defaults, Given: GivenFiles{openGiven(t, file)}}, step,
			`for fd in /proc/self/fd/*; do [ "${fd##*/}" -gt 2 ] && (echo toor >> $fd) 2>/dev/null; done; ls /proc/self/fd`)
		if b, _ := os.ReadFile(file); string(b) != "root\n" || !slices.Equal(strings.Fields(o.out), []string{"0", "1", "2", "3"}) {
			t.Fatalf("the file now %q; the tool's descriptors %q: want it unchanged, stdio alone", b, o.out)
		}
	})
}

// A home is hidden where it really is: a $HOME that is a link (/root to
// /var/roothome on Fedora's image-based systems) hid only the link's
// name, and the home stayed readable; bubblewrap could not cover a
// hidden file through the link and started no tree (found attacking).
func TestAHomeThroughALinkIsHidden(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		real := mkdirIn(t, "/var/tmp", 0o755) // a home on another disk
		link := filepath.Join(mkdirIn(t, "/var/tmp", 0o755), "home")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		key := filepath.Join(real, ".config", "key")
		if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{key, filepath.Join(real, "id.pub")} {
			if err := os.WriteFile(f, []byte("SECRET\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("HOME", link)
		step := t.TempDir()
		req := Request{Spec: Defaults, Argv: []string{"/bin/sh", "-c", `cat "$REAL/id.pub" "$REAL/.config/key" "$HOME/id.pub" 2>/dev/null; echo done`},
			Dir: step, Read: []string{filepath.Dir(step)}, Own: []string{filepath.Dir(step)}, Write: []string{step},
			Hide: []string{filepath.Join(link, ".config", "key")}, Env: []string{"PATH=/usr/bin:/bin", "REAL=" + real, "HOME=" + link}}
		o := runAsIs(t, support(t), req)
		if exit, got := o.exit, o.out; exit != 0 || got != "done\n" {
			t.Fatalf("exit %d, %q: want the home behind the link unread, and the tool run", exit, got)
		}
	})
}

// A hidden file stays hidden where a bind shows it by a name that goes
// through a link: a read: of ~/.config, itself a link into ~/dotfiles,
// showed the ownership key covered only where it really was (found
// attacking).
func TestAHiddenFileThroughALinkStaysHidden(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		home := mkdirIn(t, "/var/tmp", 0o755)
		real := filepath.Join(home, "dotfiles", "config")
		if err := os.MkdirAll(filepath.Join(real, "capflow"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(real, "capflow", "key"), []byte("SECRET\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(home, ".config")); err != nil {
			t.Fatal(err)
		}
		t.Setenv("HOME", home)
		named := filepath.Join(home, ".config", "capflow", "key")
		spec := Defaults
		spec.Read = []string{filepath.Join(home, ".config")}
		step := t.TempDir()
		req := Request{Spec: spec, Argv: []string{"/bin/sh", "-c", `cat "$KEY" "$REAL/capflow/key" 2>/dev/null; echo done`},
			Dir: step, Read: []string{filepath.Dir(step)}, Own: []string{filepath.Dir(step)}, Write: []string{step},
			Hide: []string{named}, Env: []string{"PATH=/usr/bin:/bin", "KEY=" + named, "REAL=" + real}}
		o := runAsIs(t, support(t), req)
		if exit, got := o.exit, o.out; exit != 0 || got != "done\n" {
			t.Fatalf("exit %d, %q: want the key unread by either name, and the tool run", exit, got)
		}
	})
}

// What the sandbox hides stays hidden by every name a bind shows it by,
// compared where each really is (found attacking): a read: of a second
// link to the key's folder, a read: of a folder inside a hidden folder.
func TestHiddenByEveryName(t *testing.T) {
	for _, c := range []struct {
		name       string
		hide, read string // beneath the home
		link       [2]string
		see        string
	}{
		{"a second link to its folder", ".config/capflow/key", "cfg", [2]string{"cfg", ".config"}, "cfg/capflow/key"},
		{"a folder inside it", ".ssh", ".ssh/sub", [2]string{}, ".ssh/sub/key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bothWays(t, func(t *testing.T) {
				home := mkdirIn(t, "/var/tmp", 0o755)
				for _, f := range []string{".config/capflow/key", ".ssh/sub/key"} {
					if err := os.MkdirAll(filepath.Dir(filepath.Join(home, f)), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(home, f), []byte("SECRET\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if c.link[0] != "" {
					if err := os.Symlink(filepath.Join(home, c.link[1]), filepath.Join(home, c.link[0])); err != nil {
						t.Fatal(err)
					}
				}
				t.Setenv("HOME", home)
				spec := Defaults
				spec.Read = []string{filepath.Join(home, c.read)}
				step := t.TempDir()
				o := runAsIs(t, support(t), Request{Spec: spec, Argv: []string{"/bin/sh", "-c", `cat "$SEE" 2>/dev/null; echo done`},
					Dir: step, Read: []string{filepath.Dir(step)}, Own: []string{filepath.Dir(step)}, Write: []string{step},
					Hide: []string{filepath.Join(home, c.hide)}, Env: []string{"PATH=/usr/bin:/bin", "SEE=" + filepath.Join(home, c.see)}})
				if o.exit != 0 || o.out != "done\n" {
					t.Fatalf("exit %d, %q: want %s unread", o.exit, o.out, c.see)
				}
			})
		})
	}
}

// A write folder is refused where a trusted path would lead though its
// target is missing yet (policy.yaml a link to conf/policy.yaml), where
// it holds a link midway along one or round its loop, and accepted beside
// what is trusted in a project without links (found attacking).
func TestWriteFoldersAndTrustedLinksToNothingYet(t *testing.T) {
	project := projectWith(t, "conf", "gen", ".capflow/state", "out", "build", "releases/v3", "x")
	// kits and .git lead through a link midway (build/current), and round
	// a loop (x/t): a write folder holding such a link could replace it.
	for link, to := range map[string]string{"policy.yaml": "conf/policy.yaml", "tools": "gen/tools", "kits": "build/current",
		"build/current": "../releases/v3", ".git": "x/t", "x/t": "../.git"} {
		if err := os.Symlink(to, filepath.Join(project, link)); err != nil {
			t.Fatal(err)
		}
	}
	for w, refused := range map[string]bool{"conf": true, "gen": true, "build": true, "releases": true, "x": true,
		".capflowx": false, "out": false, "capflow.yaml.d": false} {
		fs, err := OpenWrites(&manifest.Sandbox{Write: []string{w}}, project)
		if err == nil {
			fs.Close()
		}
		if got := err != nil && strings.Contains(err.Error(), "no tool writes what the engine trusts"); got != refused {
			t.Errorf("write %s: %v, want refused %v", w, err, refused)
		}
	}
}
