package sandbox

// A step's start and end through the zygote: what the attacks on its
// protocol, its held mount namespace and its pooled sets found.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTheStepsMountsGoWithIt: a zygote tree's mount namespace is held
// from its start (its init's exit then need not wait for the mounts'
// teardown) and dropped before its cgroups go back: once settled, no
// handle on it is left, and a set is given back with what its /tmp held
// charged to it no more. Four trees a row, each filling /tmp with 40 MiB
// of its 64. As another user, the namespace only.
func TestTheStepsMountsGoWithIt(t *testing.T) {
	s := support(t)
	spec := Defaults
	spec.Memory = 64 << 20
	var charged atomic.Int64 // the most a set held as it was given back
	s.Settle()               // what earlier tests finished is back: none of it is seen
	onRelease = func(cg *cgroup) { charged.Store(max(charged.Load(), memoryUsed(cg))) }
	t.Cleanup(func() { s.Settle(); onRelease = nil })
	for i := range 4 {
		dir := t.TempDir()
		in, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		tree := startWay(t, s, Request{Argv: []string{"/bin/sh", "-c", "head -c 41943040 /dev/zero > /tmp/fill && { read x || true; }"},
			Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Write: []string{dir}, Spec: spec}, Stdio{In: in, Out: io.Discard})
		in.Close()
		var ns string
		if tree.mounts != nil {
			ns, _ = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", tree.mounts.Fd()))
		}
		// Root reads the init's own: the handle is on the tree's namespace.
		if own, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", tree.init)); err == nil && own != ns {
			t.Errorf("tree %d: the handle held is on %q, the tree's namespace is %s", i, ns, own)
		}
		_ = w.Close()
		exit, _ := tree.Wait()
		if b := tree.Finish(exit, ""); b != nil || exit != 0 {
			t.Fatalf("tree %d: exit %d, breach %v", i, exit, b)
		}
		s.Settle()
		if !strings.HasPrefix(ns, "mnt:[") {
			t.Fatalf("tree %d: no handle on its mount namespace was held (%q)", i, ns)
		}
		if left := handlesOn(t, ns); left != 0 {
			t.Errorf("tree %d: %d handles on its mount namespace %s after it was put away", i, left, ns)
		}
	}
	if c := charged.Load(); c > 16<<20 {
		t.Errorf("a set went back holding %d MiB: a tree's /tmp outlived it there", c>>20)
	}
}

// handlesOn counts this process's descriptors on the namespace ns
// ("mnt:[inode]").
func handlesOn(t *testing.T, ns string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); l == ns {
			n++
		}
	}
	return n
}

// memoryUsed is what cg's memory controller charges it now.
func memoryUsed(cg *cgroup) int64 {
	for _, f := range []string{"memory.current", "memory.usage_in_bytes"} {
		if cg.hasFile("memory", f) {
			v, _ := strconv.ParseInt(strings.TrimSpace(cg.read("memory", f)), 10, 64)
			return v
		}
	}
	return 0
}

// TestAScriptWithManyArguments: a tool that is a script without "#!" is
// run by /bin/sh with its arguments, however many: execvp lays out that
// list on the stack of the tool before its exec (40,000 overflowed the
// fixed stack the zygote's tool had, into its init's, found attacking).
// The zygote's alone: bubblewrap takes 9,000 arguments at most.
func TestAScriptWithManyArguments(t *testing.T) {
	s := support(t)
	step := t.TempDir()
	tool := filepath.Join(step, "tool")
	if err := os.WriteFile(tool, []byte("echo \"args: $#\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{tool}, slices.Repeat([]string{"x"}, 40000)...)
	var out bytes.Buffer
	tree := startWay(t, s, Request{Argv: argv, Dir: step, Env: []string{"PATH=/usr/bin:/bin"}, Read: []string{filepath.Dir(step)},
		Own: []string{filepath.Dir(step)}, Write: []string{step}, Spec: Defaults}, Stdio{Out: &out, Err: &out})
	exit, _ := tree.Wait()
	tree.Finish(exit, out.String())
	if exit != 0 || out.String() != "args: 40000\n" {
		t.Fatalf("exit %d: %q", exit, out.String())
	}
}

// TestAToolsStartIsNotTheSetups: the zygote answers once a step is set
// up, before its tool starts: a tool whose exec blocks (here its failure,
// 70 KB of name, written to a stderr no one reads yet) holds its own step,
// never the zygote, whose setup bound (10 s) would kill the step as a
// failed setup (found attacking the tool started as posix_spawn does).
func TestAToolsStartIsNotTheSetups(t *testing.T) {
	if !zygoteBuilt {
		t.Fatal("built without cgo: no zygote to test")
	}
	z := zygoteForTest(t, support(t))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	null := devNull(t)
	name := "/" + strings.Repeat("n", 70000)
	pid, mounts, err := z.spawn([]byte("--\x00"+name+"\x00"), []*os.File{null, w, w})
	w.Close()
	mounts.Close()
	if err != nil || pid <= 0 {
		t.Fatalf("the zygote did not answer before the tool's exec: %d %v", pid, err)
	}
	out, _ := io.ReadAll(r)
	p, _ := os.FindProcess(pid)
	st, _ := p.Wait()
	if st.ExitCode() != 127 || !strings.Contains(string(out), "capflow sandbox: exec /nnn") {
		t.Fatalf("exit %d: %.200q", st.ExitCode(), out)
	}
}

// TestNoFilterNoZygote: a zygote is never started with no seccomp filter
// because one could not be made (a worker out of descriptors): its steps
// would have run unfiltered (found attacking). Where the architecture has
// none, it reads an empty one.
func TestNoFilterNoZygote(t *testing.T) {
	if _, err := zygoteFilter(func() (*os.File, error) { return nil, unix.EMFILE }); !errors.Is(err, unix.EMFILE) {
		t.Fatalf("a filter that could not be made: %v", err)
	}
	f, err := zygoteFilter(func() (*os.File, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, err := io.ReadAll(f); err != nil || len(b) != 0 {
		t.Fatalf("no filter here: %q %v", b, err)
	}
}

// TestABadFilterIsNoFilterNever: a zygote given a filter not in whole
// instructions, or longer than it takes, does not start (found attacking:
// it ran its steps with no filter, or a filter cut short); an empty one
// is an architecture without one.
func TestABadFilterIsNoFilterNever(t *testing.T) {
	if !zygoteBuilt {
		t.Fatal("built without cgo: no zygote to test")
	}
	defer func(was func() (*os.File, error)) { filterMade = was }(filterMade)
	f, err := newForker(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.stop()
	for _, c := range []struct {
		size int
		want string
	}{{7, "the seccomp filter: 7 bytes read"}, {4097 * 8, "the seccomp filter: -1 bytes read"}} {
		filterMade = func() (*os.File, error) {
			r, w, err := os.Pipe()
			if err == nil {
				_ = unix.SetNonblock(int(w.Fd()), false)
				go func() { _, _ = w.Write(make([]byte, c.size)); w.Close() }()
			}
			return r, err
		}
		z := startZygote(&Support{exe: support(t).exe}, f)
		<-z.ready
		if z.err == nil || !strings.Contains(z.err.Error(), c.want) {
			t.Fatalf("a zygote given %d bytes of filter: %v", c.size, z.err)
		}
	}
}

// TestAZygoteOfRootsStepsServesOnlyAsTheStepUser: a zygote that started
// before another could run a root worker's steps as the step user (its
// own user namespaces failed once) serves none once one does, and is
// ended for a new one (found attacking: its steps ran as root).
func TestAZygoteOfRootsStepsServesOnlyAsTheStepUser(t *testing.T) {
	fake, f := fakeZygote(t, "printf ready >&3\nsleep 30\n")
	s := &Support{exe: fake}
	z := startZygote(s, f)
	<-z.ready
	defer z.stop()
	if z.err != nil || z.stepUser {
		t.Fatalf("the fake zygote: %v, step user %v", z.err, z.stepUser)
	}
	cg := &cgroup{zygote: z}
	if got, err := s.zygoteFor(cg); got != z || err != nil {
		t.Fatalf("before any zygote ran steps as the step user: %v %v", got, err)
	}
	s.stepUser.Store(true) // another zygote of the worker's does
	if got, err := s.zygoteFor(cg); got != nil || err == nil || !z.broken() {
		t.Fatalf("a zygote running steps as root served a step user's worker: %v %v (broken %v)", got, err, z.broken())
	}
}

// TestALaterZygotesFailureIsItsOwn: only a zygote's failure to lay out a
// step before any could says the machine cannot, turning zygotes off; a
// later one's (its set's memory full, say) is its own, so a root worker's
// steps never go to bubblewrap, as root, for it (found attacking).
func TestALaterZygotesFailureIsItsOwn(t *testing.T) {
	fake, f := fakeZygote(t, "printf 'err 0 cannot lay out a step' >&3\n")
	for _, up := range []bool{false, true} {
		s := &Support{exe: fake}
		s.zygoteUp.Store(up)
		z := startZygote(s, f)
		<-z.ready
		if !errors.Is(z.err, errLayout) {
			t.Fatalf("up %v: %v", up, z.err)
		}
		if off := s.zygoteOff.Load() != nil; off == up {
			t.Errorf("a zygote had laid out a step before: %v; zygotes turned off: %v", up, off)
		}
	}
}

// TestAZygoteKilledMidRequestStartsNothing: a step's tool starts only once
// the zygote has answered the worker, who otherwise would not know of it:
// a zygote killed after its step's init has reported and before answering
// leaves that init to end without its tool (found attacking: the tool ran
// on, unwatched, and the init stayed a zombie). The worker was told its
// pid first, so it reaps it. The zygote is stopped once it has started
// the init, and killed once the init waits for it. (A zygote that answered
// before it was stopped is the other race: asked again.)
func TestAZygoteKilledMidRequestStartsNothing(t *testing.T) {
	if !zygoteBuilt {
		t.Fatal("built without cgo: no zygote to test")
	}
	s := support(t)
	step := t.TempDir()
	null := devNull(t)
	words, err := s.zygoteWords(Request{Argv: []string{"/bin/sh", "-c", "exit 7"}, Dir: step, Env: []string{"PATH=/usr/bin:/bin"},
		Read: []string{filepath.Dir(step)}, Own: []string{filepath.Dir(step)}, Write: []string{step}, Spec: Defaults}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		if try == 20 {
			t.Fatal("the zygote answered before every kill")
		}
		z := zygoteForTest(t, s)
		if _, _, err := z.conn.WriteMsgUnix(words, unix.UnixRights(int(null.Fd()), int(null.Fd()), int(null.Fd())), nil); err != nil {
			t.Fatal(err)
		}
		first, _, err := z.read(10 * time.Second)
		pid, _ := strconv.Atoi(strings.TrimPrefix(first, "pid "))
		if err != nil || pid <= 0 {
			t.Fatalf("the zygote's first word: %q %v", first, err)
		}
		_ = z.cmd.Process.Signal(syscall.SIGSTOP)
		waitForRead(t, pid)
		_ = z.cmd.Process.Kill()
		answer, mounts, _ := z.read(10 * time.Second)
		mounts.Close()
		p, _ := os.FindProcess(pid)
		st, err := p.Wait()
		if err != nil {
			t.Fatalf("the init %d: %v", pid, err)
		}
		if strings.HasPrefix(answer, "ok ") {
			continue
		}
		if st.ExitCode() != 126 { // 7: the tool ran
			t.Fatalf("the zygote killed before answering (%q): the init's exit %d, want 126", answer, st.ExitCode())
		}
		return
	}
}

// waitForRead waits until process pid is in read(2) (its first since it
// started, here: the init waiting for its zygote), or has moved on past it
// (its tool started: it waits for it, or has ended), 10 s at most.
func waitForRead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
		nr, _, _ := strings.Cut(string(b), " ")
		if err != nil || nr == "0" || nr == "61" || nr == "56" {
			return
		}
	}
	t.Fatalf("the init %d never waited for its zygote", pid)
}

// TestAZygotesWordEndsOnlyItsInit: the worker ends and reaps only what a
// zygote's word may name, a child of its own that starts a PID namespace,
// and makes no tree of an answer without one (found attacking: "ok 0"
// made a tree with no process, whose Wait panicked; a pid named was
// killed whatever it was).
func TestAZygotesWordEndsOnlyItsInit(t *testing.T) {
	victim := exec.Command("sleep", "30")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	v := strconv.Itoa(victim.Process.Pid)
	f, err := newForker(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.stop()
	null := devNull(t)
	// An init of the worker's own, named only in the answer (the zygote
	// could not send its pid first): ended and reaped all the same.
	init := exec.Command("sleep", "30")
	init.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := init.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = init.Process.Kill(); _ = init.Wait() }()
	n := strconv.Itoa(init.Process.Pid)
	for _, c := range []struct {
		answers []string
		ended   int // the pid the worker is to end and reap (0: none)
	}{
		{[]string{"pid " + v, "err " + v + " no"}, 0}, {[]string{"pid " + v, "ok " + v}, 0}, {[]string{"ok 0"}, 0},
		{[]string{"pid 1", "ok 1"}, 0}, {[]string{"ok " + n}, init.Process.Pid}, {[]string{"err " + n + " naming"}, init.Process.Pid},
	} {
		answers := c.answers
		fake := filepath.Join(t.TempDir(), "zygote")
		script := "#!/bin/sh\nprintf ready >&3\ndd bs=262144 count=1 <&3 >/dev/null 2>&1\n"
		for _, a := range answers {
			script += "printf '" + a + "' >&3\n"
		}
		if err := os.WriteFile(fake, []byte(script+"sleep 5\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		z := startZygote(&Support{exe: fake}, f)
		<-z.ready
		if z.err != nil {
			t.Fatal(z.err)
		}
		pid, mounts, err := z.spawn([]byte("--\x00/bin/true\x00"), []*os.File{null, null, null})
		mounts.Close()
		if err == nil || pid != c.ended {
			t.Errorf("%q: pid %d (want %d to end and reap), %v", answers, pid, c.ended, err)
		}
		z.stop()
		if victim.ProcessState != nil || victim.Process.Signal(syscall.Signal(0)) != nil {
			t.Fatalf("%q: the worker's other child was ended", answers)
		}
	}
}

// devNull is /dev/null open for reading and writing, closed when the test
// ends.
func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fakeZygote is a shell script standing for a zygote (body: what it says
// on its socket, descriptor 3) and a forker thread to start it from,
// stopped when the test ends.
func fakeZygote(t *testing.T, body string) (string, *forker) {
	t.Helper()
	fake := filepath.Join(t.TempDir(), "zygote")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := newForker(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.stop)
	return fake, f
}
