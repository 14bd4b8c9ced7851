package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/capflow/capflow/internal/manifest"
)

// zygoteForTest is the zygote of a cgroup set taken for the test (given
// back when it ends), started.
func zygoteForTest(t *testing.T, s *Support) *zygote {
	t.Helper()
	cg, err := s.takeCgroup(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.release(cg) })
	s.waitZygote(cg)
	z, err := s.zygoteFor(cg)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// TestZygoteRefusesWhatItDoesNotMake: the zygote starts nothing for a
// request it cannot read whole (a mount of a kind it does not make, a word
// missing, a descriptor it was not given, no command) and goes on serving;
// a word holding a NUL (which would read as two) never reaches it.
func TestZygoteRefusesWhatItDoesNotMake(t *testing.T) {
	if !zygoteBuilt {
		t.Fatal("built without cgo: no zygote to test")
	}
	s := support(t)
	z := zygoteForTest(t, s)
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	stdio := []*os.File{null, null, null}
	words := func(w ...string) []byte { return []byte(strings.Join(w, "\x00") + "\x00") }
	for _, c := range []struct {
		req  []byte
		want string
	}{
		{words("--dev-bind", "/", "/x", "--", "/bin/true"), "--dev-bind is not a mount the zygote makes"},
		{words("--tmpfs"), "--tmpfs needs its arguments"},
		{words("--rlimit", "1", "2"), "--rlimit needs its arguments"},
		{words("--chdir", "/"), "no command"},
		{words("--bind-fd", "7", "/x", "--", "/bin/true"), "--bind-fd 7"},
		{words("--bind-fd", "1", "/x", "--", "/bin/true"), "--bind-fd 1"},
		{words("--ctl", "1", "--", "/bin/true"), "--ctl 1"}, // stdio is never the control socket
		{words("--ctl", "3", "--", "/bin/true"), "--ctl 3"}, // nor a descriptor not sent
		{[]byte("--\x00/bin/tru"), "a word without its NUL"},
	} {
		pid, mounts, err := z.spawn(c.req, stdio)
		if mounts != nil {
			t.Errorf("%q: a refused step's mount namespace was handed over", c.req)
			mounts.Close()
		}
		if pid > 0 {
			p, _ := os.FindProcess(pid)
			_, _ = p.Wait()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.req, err, c.want)
		}
	}
	if _, err := s.zygoteWords(Request{Argv: []string{"/bin/true", "x\x00--bind\x00/\x00/"}}, nil); err == nil {
		t.Fatal("an argument holding a NUL was sent")
	}
	// Within zygoteMax but past the socket's default send buffer (the
	// attack's 220,000 bytes of arguments ended the zygote).
	big := words("--", "/bin/true", strings.Repeat("y", 110000), strings.Repeat("y", 110000))
	if pid, mounts, err := z.spawn(big, stdio); err != nil || pid <= 0 {
		t.Errorf("a request of %d bytes: %d %v", len(big), pid, err)
	} else if p, _ := os.FindProcess(pid); p != nil {
		mounts.Close()
		_, _ = p.Wait()
	}
	pid, mounts, err := z.spawn(words("--", "/bin/true"), stdio)
	if err != nil || pid <= 0 || mounts == nil {
		t.Fatalf("after the refusals: %d %v (mount namespace %v)", pid, err, mounts)
	}
	mounts.Close()
	p, _ := os.FindProcess(pid)
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Fatalf("/bin/true: %v %v", st, err)
	}
}

// TestZygoteFindings: what attacking the zygote found, each both ways
// where bubblewrap can run it: a read-only mount inside a write folder
// stays read-only (a mount the machine made after the zygote started
// included); a FIFO where a hidden file is covered does not hang the
// step; a command of 140,000 words reaches the tool whole.
func TestZygoteFindings(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		if os.Geteuid() == 0 {
			step := t.TempDir()
			sub, src := filepath.Join(step, "sub"), t.TempDir()
			os.Mkdir(sub, 0o755)
			if err := unix.Mount(src, sub, "", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
			defer unix.Unmount(sub, unix.MNT_DETACH)
			if err := unix.Mount("", sub, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				t.Fatal(err)
			}
			o := run(t, Defaults, step, `(echo x > "$STEP/sub/pwned") 2>/dev/null && echo WROTE || echo refused; echo y > "$STEP/mine" && echo mine`)
			if o.out != "refused\nmine\n" {
				t.Fatalf("a read-only mount inside the write folder: %q", o.out)
			}
		}
		step := t.TempDir()
		fifo := filepath.Join(step, "secret")
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		// A manifest's write folder is handed over by its handle: what is
		// mounted inside it comes with it, read-only stays read-only
		// (found attacking again: the zygote dropped it), and the
		// machine's device nodes are not the tool's to change.
		if os.Geteuid() == 0 {
			project := t.TempDir()
			sub := filepath.Join(project, "out", "protected")
			os.MkdirAll(sub, 0o755)
			os.Mkdir(filepath.Join(project, "step"), 0o755)
			os.WriteFile(filepath.Join(sub, "keep"), []byte("ORIGINAL\n"), 0o644)
			if err := unix.Mount(sub, sub, "", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
			defer unix.Unmount(sub, unix.MNT_DETACH)
			if err := unix.Mount("", sub, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				t.Fatal(err)
			}
			spec, folders, err := SpecFor(&manifest.Sandbox{Write: []string{"out"}}, project)
			if err != nil {
				t.Fatal(err)
			}
			defer folders.Close()
			o := runWith(t, Request{Spec: spec, Folders: folders}, filepath.Join(project, "step"),
				fmt.Sprintf(`(echo TAMPERED > %q/keep) 2>/dev/null && echo WROTE || echo refused; echo x > /dev/null && echo null; (touch /dev/null) 2>/dev/null && echo TOUCHED || echo kept`, sub))
			b, _ := os.ReadFile(filepath.Join(sub, "keep"))
			want := "refused\nnull\nkept\n"
			if way == WayBubblewrap {
				want = "refused\nnull\nTOUCHED\n" // bubblewrap's device binds are writable mounts
			}
			if o.out != want || string(b) != "ORIGINAL\n" {
				t.Fatalf("a read-only mount in a handed-over write folder, the device nodes: %q, the file %q", o.out, b)
			}
		}
		// Covered by the null device (unreadable: no device files in a
		// bind): the step ran, under the zygote (startWay checks it).
		o := runWith(t, Request{Spec: Defaults, Hide: []string{fifo}}, step, `cat "$STEP/secret" 2>/dev/null; echo "done $?"`)
		if o.out != "done 1\n" {
			t.Fatalf("a FIFO covered: %q", o.out)
		}
	})
	// bubblewrap cannot start a command that long (its own arguments).
	s, dir := support(t), t.TempDir()
	argv := []string{"/bin/sh", "-c", `eval echo "$# \${$#}"`, "sh"}
	for i := 0; i < 140000; i++ {
		argv = append(argv, "")
	}
	argv = append(argv, "last")
	var out bytes.Buffer
	tree := startWay(t, s, Request{Argv: argv, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Write: []string{dir}, Spec: Defaults}, Stdio{Out: &out, Err: &out})
	exit, _ := tree.Wait()
	tree.Finish(exit, "")
	if out.String() != "140001 last\n" {
		t.Fatalf("a long command: exit %d, %q", exit, out.String())
	}
}

// TestWriteFoldersByHandle: a manifest's write folder is handed to the
// tree by its handle (--bind-fd; the zygote finds it by its path and
// checks it is the same folder) and is writable there, both ways, while
// its sibling stays read-only.
func TestWriteFoldersByHandle(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		project := projectWith(t, "out", "other", "step")
		spec, folders, err := SpecFor(&manifest.Sandbox{Write: []string{"out"}}, project)
		if err != nil {
			t.Fatal(err)
		}
		defer folders.Close()
		out, other := filepath.Join(project, "out"), filepath.Join(project, "other")
		o := runWith(t, Request{Spec: spec, Folders: folders}, filepath.Join(project, "step"),
			fmt.Sprintf(`echo hi > %q/x && echo wrote; (echo no > %q/x) 2>/dev/null || echo refused`, out, other))
		if o.out != "wrote\nrefused\n" {
			t.Fatalf("%q", o.out)
		}
		if b, err := os.ReadFile(filepath.Join(out, "x")); err != nil || string(b) != "hi\n" {
			t.Fatalf("the write folder: %q %v", b, err)
		}
	})
}

// A zygote that died between steps (the OOM killer's pick when a step
// filled its cgroup's memory with tmpfs files) is replaced when its set
// is next taken: that step runs by a new zygote instead of failing, or
// going to bubblewrap (found attacking issue 57).
func TestDeadZygoteIsReplaced(t *testing.T) {
	s := support(t)
	if !s.zygotes() {
		t.Fatal("this machine has no zygotes")
	}
	cg, err := s.takeCgroup(true)
	if err != nil {
		t.Fatal(err)
	}
	s.waitZygote(cg)
	z, err := s.zygoteFor(cg)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(z.pid(), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-z.ended
	s.release(cg)
	// The pool gives back the set last released: this one, here and below.
	again, err := s.takeCgroup(true)
	if err != nil {
		t.Fatal(err)
	}
	s.release(again)
	if again != cg || again.zygote == z {
		t.Fatal("the dead zygote still serves its set")
	}
	step := t.TempDir()
	var out bytes.Buffer
	tree, err := s.Start(Request{Argv: []string{"/bin/sh", "-c", "echo ok"}, Dir: step, Env: []string{"PATH=/usr/bin:/bin"},
		Read: []string{filepath.Dir(step)}, Write: []string{step}, Spec: Defaults, zygoteWait: true}, Stdio{Out: &out, Err: &out})
	if err != nil {
		t.Fatal(err)
	}
	exit, _ := tree.Wait()
	tree.Finish(exit, out.String())
	if exit != 0 || out.String() != "ok\n" || tree.Way() != WayZygote {
		t.Fatalf("exit %d, way %s: %q", exit, tree.Way(), out.String())
	}
}

// A zygote that exits as it starts is known at once by its socket's end:
// the worker's end of the pair was still open in the worker, so only the
// 10 s wait for "ready" told it, and its set's steps ran under bubblewrap
// meanwhile.
func TestAZygoteThatExitsAtOnceIsKnownAtOnce(t *testing.T) {
	f, err := newForker(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.stop()
	z := &zygote{ready: make(chan struct{}), ended: make(chan struct{})}
	err = z.start("/bin/true", f)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("a zygote that exited at once: %v, want the socket's end", err)
	}
}
