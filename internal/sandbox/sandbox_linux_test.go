package sandbox

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/manifest"
	"golang.org/x/sys/unix"
)

// These tests run real bubblewrap over real processes: a machine that
// cannot confine fails them (make test installs bubblewrap).
func support(t *testing.T) *Support {
	t.Helper()
	s := Probe()
	if s.Missing() != "" {
		t.Fatalf("this machine cannot confine: %s", s.Missing())
	}
	return s
}

type outcome struct {
	exit   int
	out    string
	breach *Breach
}

func run(t *testing.T, spec Spec, step string, script string) outcome {
	t.Helper()
	return runWith(t, Request{Spec: spec}, step, script)
}

// way is how runWith confines: WayZygote (waiting for the zygote, and
// failing unless it took the tree) or WayBubblewrap; bothWays sets it.
var way = WayZygote

// bothWays runs f as two subtests, one a way.
func bothWays(t *testing.T, f func(t *testing.T)) {
	for _, w := range []string{WayZygote, WayBubblewrap} {
		t.Run(w, func(t *testing.T) {
			was := way
			way = w
			defer func() { way = was }()
			f(t)
		})
	}
}

// runWith runs script as req says (its Spec, Outbound) in step.
func runWith(t *testing.T, req Request, step string, script string) outcome {
	t.Helper()
	s := support(t)
	req.Argv, req.Dir, req.Read = []string{"/bin/sh", "-c", script}, step, []string{filepath.Dir(step)}
	req.Env, req.Write = []string{"PATH=/usr/bin:/bin", "STEP=" + step}, []string{step}
	var out bytes.Buffer
	tree := startWay(t, s, req, Stdio{Out: &out, Err: &out})
	exit, _ := tree.Wait()
	return outcome{exit, out.String(), tree.Finish(exit, out.String())}
}

// startWay starts req the way the test runs (way), and fails if it was
// not: a step with the network is bubblewrap's either way.
func startWay(t *testing.T, s *Support, req Request, std Stdio) *Tree {
	t.Helper()
	if way == WayBubblewrap {
		cmd, tree, err := s.Command(req)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = std.In, std.Out, std.Err
		if err := tree.Start(); err != nil {
			t.Fatal(err)
		}
		return tree
	}
	req.zygoteWait = true
	tree, err := s.Start(req, std)
	if err != nil {
		t.Fatal(err)
	}
	// A step with the network, a server, a build without cgo: bubblewrap's.
	if want := WayZygote; req.Spec.Network || req.Server || !zygoteBuilt {
		want = WayBubblewrap
	} else if tree.Way() != want {
		tree.Kill()
		_, _ = tree.Wait()
		tree.Finish(-1, "")
		t.Fatalf("confined by %s, not %s", tree.Way(), want)
	}
	return tree
}

func TestWritesOnlyInTheStepFolder(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		project := t.TempDir()
		step := filepath.Join(project, "step")
		if err := os.Mkdir(step, 0o755); err != nil {
			t.Fatal(err)
		}
		outside := filepath.Join(project, "escaped.txt")
		o := run(t, Defaults, step, fmt.Sprintf(`echo ok > "$STEP/out.txt" && echo bad > %q; echo "exit $?"; touch /etc/capflow-test 2>&1; echo tmp > /tmp/x && cat /tmp/x`, outside))
		if b, err := os.ReadFile(filepath.Join(step, "out.txt")); err != nil || string(b) != "ok\n" {
			t.Fatalf("step folder write: %q %v (%s)", b, err, o.out)
		}
		if _, err := os.Stat(outside); err == nil {
			t.Fatalf("the tool wrote %s outside its step folder", outside)
		}
		if !strings.Contains(o.out, "exit 2") || !strings.Contains(o.out, "escaped.txt: Read-only file system") || !strings.Contains(o.out, "tmp\n") {
			t.Fatalf("output: %s", o.out)
		}
		if _, err := os.Stat("/etc/capflow-test"); err == nil {
			t.Fatal("the tool wrote in /etc")
		}
	})
}

func TestNoNetworkButItsOwnLoopback(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		port := l.Addr().(*net.TCPAddr).Port
		probe := fmt.Sprintf(`python3 -c 'import socket; s=socket.socket(); s.settimeout(2); print("open" if s.connect_ex(("127.0.0.1", %d))==0 else "refused")'`, port)
		if o := run(t, Defaults, t.TempDir(), probe); strings.TrimSpace(o.out) != "refused" {
			t.Fatalf("confined tool reached the host's loopback server: %q", o.out)
		}
		// network: true is no route to the host either: the tool's HTTP
		// clients reach the network through the proxy its Outbound serves.
		withNet := Defaults
		withNet.Network = true
		if o := run(t, withNet, t.TempDir(), probe); strings.TrimSpace(o.out) != "refused" {
			t.Fatalf("network: true reached the host's loopback directly: %q", o.out)
		}
		var asked atomic.Value
		outbound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked.Store(r.Method + " " + r.URL.String())
			fmt.Fprint(w, "proxied")
		})
		o := runWith(t, Request{Spec: withNet, Outbound: outbound}, t.TempDir(), `curl -s http://example.test/x; echo; echo "$HTTP_PROXY"`)
		if !strings.HasPrefix(o.out, "proxied\nhttp://127.0.0.1:") || asked.Load() != "GET http://example.test/x" {
			t.Fatalf("the tool's request did not go through its proxy: %q %v", o.out, asked.Load())
		}
		// A port the run was given is on the tree's own loopback too, relayed
		// to the host's (clients that skip proxies for loopback reach it).
		relay := func(p uint16) (net.Conn, error) { return net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p)) }
		o = runWith(t, Request{Spec: withNet, Mirror: []uint16{uint16(port)}, Relay: relay}, t.TempDir(), probe)
		if strings.TrimSpace(o.out) != "open" {
			t.Fatalf("a mirrored port: %q", o.out)
		}
	})
}

func TestLimitsStopTheTree(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		s := support(t)
		if len(s.Controllers()) < 3 {
			t.Fatalf("this machine's cgroups: %v (want memory, pids, cpuacct)", s.Controllers())
		}
		small := Defaults
		small.Memory, small.Pids, small.CPU, small.FileSize = 64<<20, 16, 2*time.Second, 1<<20
		cases := []struct {
			name, script, limit string
		}{
			{"memory", `python3 -c 'b = bytearray(300 << 20); print(len(b))'`, "memory"},
			{"pids", `for i in $(seq 40); do sleep 30 & done; wait`, "pids"},
			{"cpu", `while :; do :; done`, "cpu"},
			{"file size", `head -c 2000000 /dev/zero > "$STEP/big"`, "file_size"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				start := time.Now()
				o := run(t, small, t.TempDir(), c.script)
				if o.breach == nil || o.breach.Limit != c.limit {
					t.Fatalf("breach %v, want %s (exit %d, %s)", o.breach, c.limit, o.exit, o.out)
				}
				if o.exit == 0 {
					t.Fatalf("exit 0 after passing %s", c.limit)
				}
				if d := time.Since(start); d > 20*time.Second {
					t.Fatalf("took %s to stop", d)
				}
			})
		}
	})
}

// A step's tree is born in its cgroups (started by their forker, nothing
// moved), and its pids limit counts the tool's processes only, whatever
// earlier trees the kernel still charges.
func TestTreeIsBornInItsCgroups(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		s := support(t)
		dir := t.TempDir()
		in, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		tree := startWay(t, s, Request{Argv: []string{"/bin/sh", "-c", "read x"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"},
			Write: []string{dir}, Spec: Defaults}, Stdio{In: in})
		in.Close()
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", tree.init))
		// Before Finish: a tree's cgroups with tasks the kernel has not yet
		// let go of are removed in the background, forker and all (reading it
		// after raced that removal, a CI run under -race).
		forked, dirs := tree.cg.forker != nil, maps.Clone(tree.cg.dirs)
		_ = w.Close()
		exit, _ := tree.Wait()
		tree.Finish(exit, "")
		if err != nil {
			t.Fatal(err)
		}
		for c, d := range dirs {
			if !strings.Contains(string(b), ":"+c+":"+strings.TrimPrefix(d, "/sys/fs/cgroup/"+c)+"\n") {
				t.Errorf("the sandbox's init is not in its %s cgroup %s:\n%s", c, d, b)
			}
		}
		if !forked {
			t.Error("a step's cgroups have no forker: the tree joined them")
		}
		// Quick trees one after another: the kernel releases their tasks'
		// pids a second or two late, and the next ones may still fork.
		spec := Defaults
		spec.Pids = 5
		for i := 0; i < 8; i++ {
			if o := run(t, spec, t.TempDir(), `for i in 1 2 3; do sleep 0.05 & done; wait; echo done`); o.breach != nil || !strings.Contains(o.out, "done") {
				t.Fatalf("tree %d: five processes of its own were refused: %v %s", i, o.breach, o.out)
			}
		}
		spec.Pids = 3
		if o := run(t, spec, t.TempDir(), `for i in $(seq 20); do sleep 1 & done; wait`); o.breach == nil || o.breach.Limit != "pids" {
			t.Fatalf("a tree of 3 pids started 20 processes: %v %s", o.breach, o.out)
		}
	})
}

// TestFinishedTreesCgroupsGoBackToThePool: bubblewrap exits with its
// tool's status before the sandbox's init has torn its namespaces down, so
// a tree's cgroups are seldom empty at Finish; they go back to the pool
// once they are, not removed (the next step would make new ones and move
// a new forker's thread in: 2-3 ms).
func TestFinishedTreesCgroupsGoBackToThePool(t *testing.T) {
	s := support(t)
	for i := range 10 {
		dir := t.TempDir()
		cmd, tree, err := s.Command(Request{Argv: []string{"/bin/true"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"},
			Write: []string{dir}, Spec: Defaults})
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Start(); err != nil {
			t.Fatal(err)
		}
		cg := tree.cg
		_ = cmd.Wait()
		if b := tree.Finish(cmd.ProcessState.ExitCode(), ""); b != nil {
			t.Fatal(b)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !s.pool.holds(cg) {
			if time.Now().After(deadline) {
				t.Fatalf("tree %d: its cgroups never came back to the pool", i)
			}
			time.Sleep(time.Millisecond)
		}
		if left, ok := cg.pids(); !ok || len(left) > 0 {
			t.Fatalf("tree %d: its cgroups are pooled with processes in them: %v (read: %v)", i, left, ok)
		}
		for c, d := range cg.dirs {
			if _, err := os.Stat(d); err != nil {
				t.Fatalf("tree %d: its pooled %s cgroup is gone: %v", i, c, err)
			}
		}
	}
}

// TestDrainRemovesThePool: a stopping worker's pooled cgroups are removed
// with their forkers, and a tree released after that is not kept.
func TestDrainRemovesThePool(t *testing.T) {
	support(t)
	s := probe(false) // its own pool: the other tests' stays open
	run := func() *cgroup {
		dir := t.TempDir()
		cmd, tree, err := s.Command(Request{Argv: []string{"/bin/true"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Write: []string{dir}, Spec: Defaults})
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Start(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		tree.Finish(cmd.ProcessState.ExitCode(), "")
		return tree.cg
	}
	first := run()
	s.Drain()
	second := run()
	s.pool.releasing.Wait()
	removed(t, first)
	removed(t, second)
	if s.pool.holds(first) || s.pool.holds(second) {
		t.Fatal("the pool kept cgroups after Drain")
	}
}

// removed fails the test unless cg's folders are gone.
func removed(t *testing.T, cg *cgroup) {
	t.Helper()
	for c, d := range cg.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("the %s cgroup is still there: %s (%v)", c, d, err)
		}
	}
}

// A process the tool leaves behind (setsid, daemonized) dies with the step.
func TestNothingOutlivesTheStep(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		marker := uniqueSleep()
		o := run(t, Defaults, t.TempDir(), fmt.Sprintf(`setsid %s </dev/null >/dev/null 2>&1 & sleep 0.3; pgrep -f %q >/dev/null && echo running`, marker, marker))
		if o.exit != 0 || o.breach != nil || strings.TrimSpace(o.out) != "running" {
			t.Fatalf("exit %d breach %v: %q", o.exit, o.breach, o.out)
		}
		waitGone(t, marker)
	})
}

// uniqueSleep is a command line no other process has, to find by pgrep -f.
func uniqueSleep() string {
	return fmt.Sprintf("sleep %d.%03d", 100000+time.Now().UnixNano()%100000, time.Now().Nanosecond()%1000)
}

func waitGone(t *testing.T, marker string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		if len(bytes.TrimSpace(out)) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _ := exec.Command("ps", "-eo", "pid,args").Output()
	t.Fatalf("%s still runs:\n%s", marker, out)
}

// A server that daemonizes lives until Stop, and then nothing of it does.
func TestServerTreeLivesUntilStop(t *testing.T) {
	s := support(t)
	marker := uniqueSleep()
	dir := t.TempDir()
	cmd, tree, err := s.Command(Request{Argv: []string{"/bin/sh", "-c", fmt.Sprintf(`setsid sh -c 'trap "" TERM; %s; echo' </dev/null >/dev/null 2>&1 & exit 0`, marker)},
		Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Write: []string{dir}, Spec: Defaults, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	time.Sleep(500 * time.Millisecond)
	if out, _ := exec.Command("pgrep", "-f", marker).Output(); len(bytes.TrimSpace(out)) == 0 {
		t.Fatal("the daemonized server did not survive its first process's exit")
	}
	alive := func() bool {
		select {
		case <-exited:
			return false
		default:
			return true
		}
	}
	if how := Stop(tree.Pid(), 300*time.Millisecond, alive); how != "SIGKILL after 300ms" {
		t.Fatalf("stop: %s (the daemon ignores SIGTERM)", how)
	}
	waitGone(t, marker)
	if err := syscall.Kill(tree.Pid(), 0); err == nil && alive() {
		t.Fatal("bubblewrap still runs")
	}
}

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
n=$(find /proc/bus /proc/irq -type f -writable 2>/dev/null | wc -l); echo "writable $n"`)
		for _, k := range []string{"refused sys/vm/swappiness", "refused sys/kernel/core_pattern", "refused sys/kernel/panic", "refused irq/default_smp_affinity", "writable 0\n"} {
			if !strings.Contains(o.out, k) {
				t.Fatalf("a confined tool (euid %d): not %q:\n%s", os.Geteuid(), k, o.out)
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
		project := t.TempDir()
		for _, d := range []string{".capflow/state", "tools/x", "out"} {
			if err := os.MkdirAll(filepath.Join(project, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
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
