package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A root worker's steps forked by the zygote run as the step user
// (StepID), not as root: the machine's root-only files are not theirs to
// read, as they are not another user's worker's, even where a manifest's
// read: or an input binds them in. What the run gave them as its own stays
// theirs (a root-only file of their project, though the project's folder
// is root's alone and in no hidden root), their /tmp is theirs to write,
// and what they write in their step folder is its owner's on disk (here
// another user's). They reopen their stdio (/dev/stdout, /dev/stderr).
func TestRootWorkersStepsRunAsTheStepUser(t *testing.T) {
	asRootWithAZygote(t)
	secret := filepath.Join(mkdirIn(t, "/var/tmp", 0o700), "secret")
	bound := mkdirIn(t, "/tmp", 0o700) // in a hidden root: bound back when read
	boundSecret := filepath.Join(bound, "secret")
	project := mkdirIn(t, "/var/tmp", 0o700) // outside every hidden root
	step := filepath.Join(project, "step")
	for _, f := range []string{secret, boundSecret, filepath.Join(project, "own.txt")} {
		if err := os.WriteFile(f, []byte("root only\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(step, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(step, 1234, 1235); err != nil { // another owner: another user namespace
		t.Fatal(err)
	}
	script := `id -u; id -g
cat ` + secret + ` 2>/dev/null || echo "refused the machine's"
cat ` + boundSecret + ` 2>/dev/null || echo "refused the bound one"
cat ` + filepath.Join(project, "own.txt") + `
echo made > "$STEP/new" && echo wrote the step folder
echo t > /tmp/t && echo wrote /tmp
echo to stdout > /dev/stdout; echo to stderr > /dev/stderr`
	// The secret's folder bound too, as a manifest's read: or an input
	// naming it binds it: bound, but not the run's own. A step with the
	// network alike: it runs under capflow's init, forked by the zygote.
	for _, network := range []bool{false, true} {
		spec := Defaults
		spec.Read, spec.Network = []string{bound}, network
		_ = os.Remove(filepath.Join(step, "new"))
		o := runWith(t, Request{Spec: spec, Own: []string{project}}, step, script)
		id := strconv.Itoa(StepID)
		want := id + "\n" + id + "\nrefused the machine's\nrefused the bound one\nroot only\nwrote the step folder\nwrote /tmp\nto stdout\nto stderr\n"
		if o.exit != 0 || o.out != want {
			t.Fatalf("network %v: exit %d:\n%s\nwant:\n%s", network, o.exit, o.out, want)
		}
		st, err := os.Stat(filepath.Join(step, "new"))
		if err != nil {
			t.Fatal(err)
		}
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 1234 || sys.Gid != 1235 {
			t.Fatalf("network %v: the step's file is %d:%d on disk, not its folder's owner's (1234:1235)", network, sys.Uid, sys.Gid)
		}
	}
	id := strconv.Itoa(StepID)
	if sum := support(t).Summary(); !strings.Contains(sum, "steps forked by capflow's zygote as uid "+id) {
		t.Fatalf("the worker's start-up line does not say so: %s", sum)
	}
}

// Found attacking the step user: as nobody (65534), the steps shared their
// uid with the host's daemons and other users' squashed files, and any
// process of that uid could read a running tool's environment (its
// secrets) and reach its folders through /proc. StepID is nobody else's.
func TestNoHostProcessSharesTheStepsUser(t *testing.T) {
	asRootWithAZygote(t)
	s := support(t)
	step := t.TempDir()
	var out bytes.Buffer
	req := Request{Argv: []string{"/bin/sh", "-c", "echo started; exec sleep 30"}, Dir: step, Env: []string{"PATH=/usr/bin:/bin", "API_TOKEN=s3cr3t"},
		Read: []string{filepath.Dir(step)}, Own: []string{filepath.Dir(step)}, Write: []string{step}, Spec: Defaults}
	tree := startWay(t, s, req, Stdio{Out: &out, Err: &out})
	defer func() {
		tree.Kill()
		exit, _ := tree.Wait()
		tree.Finish(exit, "")
	}()
	tool := 0
	for deadline := time.Now().Add(10 * time.Second); tool == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", tree.Pid(), tree.Pid()))
		tool, _ = strconv.Atoi(strings.TrimSpace(string(kids)))
	}
	if tool == 0 {
		t.Fatalf("the tool did not start: %q", out.String())
	}
	if st, err := os.Stat(fmt.Sprintf("/proc/%d", tool)); err != nil || st.Sys().(*syscall.Stat_t).Uid != StepID {
		t.Fatalf("the tool is not the step user: %v", err)
	}
	for _, uid := range []uint32{StepID, 65534, StepID + 1} { // the control, nobody, a neighbour
		cmd := exec.Command("/bin/cat", fmt.Sprintf("/proc/%d/environ", tool))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		b, err := cmd.CombinedOutput()
		if read := err == nil && bytes.Contains(b, []byte("s3cr3t")); read != (uid == StepID) {
			t.Fatalf("uid %d read the tool's environment: %v (%q %v)", uid, read, b, err)
		}
	}
}

// What a root worker's step gets as its own: its Own folders and write
// folders, even inside a folder bound as it is (an input naming the
// project's parent), but in a private folder only the run's own folder,
// never the engine's state that a manifest's read: names.
func TestStepUserOwnsOnlyWhatItWasGiven(t *testing.T) {
	project := t.TempDir()
	state, run := filepath.Join(project, ".capflow", "state"), filepath.Join(project, ".capflow", "runs", "r1")
	for _, d := range []string{state, run, filepath.Join(project, "out")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	req := Request{Read: []string{filepath.Dir(project), project, run}, Own: []string{project, run}, Write: []string{filepath.Join(run, "step")},
		Private: []string{filepath.Join(project, ".capflow")}, Spec: Spec{Read: []string{state, "/etc/ssl"}, Write: []string{filepath.Join(project, "out")}}, asStepUser: true}
	args := strings.Join(support(t).mountArgs(req), " ")
	for _, want := range []string{"--ro-bind-try-own " + project + " ", "--ro-bind-try-own " + run + " ", "--ro-bind-try-named " + state + " ",
		"--bind-own " + filepath.Join(run, "step") + " ", "--bind-own " + filepath.Join(project, "out") + " "} {
		if !strings.Contains(args+" ", want) {
			t.Errorf("no %q in %s", want, args)
		}
	}
	if slices.Contains(strings.Fields(args), "/etc/ssl") {
		t.Errorf("a read: outside the hidden folders is bound: %s", args)
	}
	if parent, own := strings.Index(args, "--ro-bind-try "+filepath.Dir(project)+" "), strings.Index(args, "--ro-bind-try-own "+project+" "); parent < 0 || own < parent {
		t.Errorf("the project is not bound as the step's own after its parent: %s", args)
	}
	req.asStepUser = false
	if args := strings.Join(support(t).mountArgs(req), " "); strings.Contains(args, "-own") {
		t.Errorf("another user's worker's step gets -own binds: %s", args)
	}
}

// Found reviewing the step user: a change of user clears the parent-death
// signal the step's init armed first, so a root worker's steps outlived
// a worker killed outright. A worker (this test binary again) starts a
// step and exits without a word; the step's init must end with it.
func TestStepDiesWithItsWorker(t *testing.T) {
	pidFile := os.Getenv("CAPFLOW_TEST_STEP_PID")
	if pidFile != "" { // the worker
		// In the test's folder: this process exits before any cleanup.
		step := filepath.Join(filepath.Dir(pidFile), "step")
		if err := os.Mkdir(step, 0o755); err != nil {
			t.Fatal(err)
		}
		tree := startWay(t, support(t), Request{Argv: []string{"/bin/sleep", "60"}, Dir: step, Env: []string{"PATH=/usr/bin:/bin"},
			Read: []string{step}, Own: []string{step}, Write: []string{step}, Spec: Defaults}, Stdio{})
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(tree.Pid())), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Exit(0)
	}
	asRootWithAZygote(t)
	pidFile = filepath.Join(t.TempDir(), "pid")
	worker := exec.Command(os.Args[0], "-test.run", "^TestStepDiesWithItsWorker$", "-test.count=1")
	worker.Env = append(os.Environ(), "CAPFLOW_TEST_STEP_PID="+pidFile)
	if out, err := worker.CombinedOutput(); err != nil {
		t.Fatalf("the worker: %v\n%s", err, out)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := os.ReadFile("/proc/" + string(b) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return // gone, or dead and not yet reaped by the machine's init
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(atoiOr(string(b)), syscall.SIGKILL)
			t.Fatalf("the step's init %s outlived its worker: %s", b, st)
		}
	}
}

func atoiOr(s string) int { n, _ := strconv.Atoi(s); return n }

// asRootWithAZygote: the step user is a root worker's zygote's.
func asRootWithAZygote(t *testing.T) {
	t.Helper()
	if !zygoteBuilt {
		t.Fatal("built without cgo: no zygote to test")
	}
	if os.Geteuid() != 0 {
		t.Skip("the worker is not root: its steps are its own user, in a user namespace (TestHostileAsAnotherUser)")
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

// A root worker's init (a step with the network) starts by the
// descriptor the zygote opened: a root-only folder on its path, or one a
// step's read: binds as it is (which hid it, found attacking issue 57),
// keeps no step from starting as the step user. The tool's loader
// variables reach the tool, never the init (a preloaded library ran in it
// before it hid its control socket).
func TestStepUsersInitByDescriptor(t *testing.T) {
	asRootWithAZygote(t)
	s := support(t)
	raw, err := os.ReadFile(s.exe)
	if err != nil {
		t.Fatal(err)
	}
	locked := mkdirIn(t, "/var/tmp", 0o700)
	exe := filepath.Join(locked, "bin", "init")
	if err := os.MkdirAll(filepath.Dir(exe), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(was string) { s.exe = was }(s.exe)
	s.exe = exe
	spec := Defaults
	spec.Network, spec.Read = true, []string{locked}
	step := t.TempDir()
	var out bytes.Buffer
	// Builtins alone: the shell is the one program the loader starts.
	script := `while read -r k v _; do [ "$k" = Uid: ] && echo "$v"; done </proc/self/status; echo "$LD_PRELOAD"`
	tree, err := s.Start(Request{Argv: []string{"/bin/sh", "-c", script}, Dir: step,
		Env:  []string{"PATH=/usr/bin:/bin", "LD_PRELOAD=/capflow-no-such.so"},
		Read: []string{filepath.Dir(step)}, Own: []string{filepath.Dir(step)}, Write: []string{step}, Spec: spec, zygoteWait: true},
		Stdio{Out: &out, Err: &out})
	if err != nil {
		t.Fatal(err)
	}
	exit, _ := tree.Wait()
	tree.Finish(exit, out.String())
	// The loader says so once for each program it preloads into: the
	// shell, not the init.
	got := out.String()
	if exit != 0 || !strings.Contains(got, strconv.Itoa(StepID)+"\n/capflow-no-such.so\n") || strings.Count(got, "cannot be preloaded") != 1 || tree.Way() != WayZygote {
		t.Fatalf("exit %d, way %s:\n%s", exit, tree.Way(), got)
	}
}

// A root worker never runs a step as root: a step its zygote refuses (a
// command and environment past what a request holds, which a manifest's
// env can make) fails, saying why, rather than going to bubblewrap (found
// attacking issue 57).
func TestStepUserNeverRoot(t *testing.T) {
	asRootWithAZygote(t)
	s := support(t)
	pad := strings.Repeat("A", 100<<10)
	for _, network := range []bool{false, true} {
		spec := Defaults
		spec.Network = network
		step := t.TempDir()
		_, err := s.Start(Request{Argv: []string{"/bin/sh", "-c", "id -u"}, Dir: step,
			Env:  []string{"PATH=/usr/bin:/bin", "PAD1=" + pad, "PAD2=" + pad, "PAD3=" + pad},
			Read: []string{filepath.Dir(step)}, Own: []string{filepath.Dir(step)}, Write: []string{step}, Spec: spec, zygoteWait: true}, Stdio{})
		if !errors.Is(err, ErrNotAsStepUser) || !strings.Contains(err.Error(), "too large for the zygote") {
			t.Fatalf("network %v: %v", network, err)
		}
	}
}

// A root worker's first step, before any zygote answered (`capflow tools
// run` starts none ahead; a worker's first may have failed), waits for
// one rather than run as root under bubblewrap (found attacking issue 57).
func TestRootStepsWaitForTheirZygote(t *testing.T) {
	asRootWithAZygote(t)
	tree, out, err := firstStepsID(t)
	if err != nil {
		t.Fatal(err)
	}
	exit, _ := tree.Wait()
	tree.Finish(exit, out.String())
	if exit != 0 || out.String() != strconv.Itoa(StepID)+"\n" || tree.Way() != WayZygote {
		t.Fatalf("exit %d, way %s: %q", exit, tree.Way(), out.String())
	}
}

// A root worker without CAP_SETPCAP (a container may run one so) has a
// zygote that cannot empty its bounding set: its steps are refused, each
// saying why, never run as root under bubblewrap (found attacking the
// bounding set emptied once a zygote). The test binary again, under
// setpriv.
func TestARootWorkerWithoutSetpcapRunsNoStepAsRoot(t *testing.T) {
	const env = "CAPFLOW_TEST_NO_SETPCAP"
	if os.Getenv(env) != "" { // the worker
		tree, out, err := firstStepsID(t)
		if err == nil {
			exit, _ := tree.Wait()
			tree.Finish(exit, out.String())
			t.Fatalf("a step ran, by %s: exit %d, id %q", tree.Way(), exit, out.String())
		}
		if !errors.Is(err, ErrNotAsStepUser) || !strings.Contains(err.Error(), "drop capability") {
			t.Fatalf("refused, but not as a step user's: %v", err)
		}
		return
	}
	asRootWithAZygote(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux): %v", err)
	}
	cmd := exec.Command(setpriv, "--bounding-set", "-setpcap", os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("the worker without CAP_SETPCAP: %v\n%s", err, out)
	}
}

// firstStepsID starts `id -u` as the first step of a Support no zygote has
// answered yet (drained as the test ends).
func firstStepsID(t *testing.T) (*Tree, *bytes.Buffer, error) {
	t.Helper()
	s := probe(false)
	t.Cleanup(s.Drain)
	step := t.TempDir()
	var out bytes.Buffer
	tree, err := s.Start(Request{Argv: []string{"/bin/sh", "-c", "id -u"}, Dir: step, Env: []string{"PATH=/usr/bin:/bin"},
		Read: []string{filepath.Dir(step)}, Own: []string{filepath.Dir(step)}, Write: []string{step}, Spec: Defaults},
		Stdio{Out: &out, Err: &out})
	return tree, &out, err
}

// What a root worker's step names (a manifest's read:, an input's file)
// it reads as any user of the machine would: not behind a folder only
// root may enter, whose mode its bind's folders laid anew on the step's
// tmpfs had lost (found attacking); one any user may enter is bound.
func TestNamedPathsKeepTheFoldersAbove(t *testing.T) {
	asRootWithAZygote(t)
	for _, c := range []struct {
		mode os.FileMode
		read bool
	}{{0o700, false}, {0o755, true}} {
		folder := mkdirIn(t, "/tmp", c.mode) // in a hidden root: bound back when read
		file := filepath.Join(folder, "inside", "config")
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte("a config\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, by := range []string{"read:", "input"} {
			req := Request{Spec: Defaults}
			if by == "read:" {
				req.Spec.Read = []string{file}
			} else {
				req.Given = GivenFiles{openGiven(t, file)}
			}
			o := runWith(t, req, t.TempDir(), "cat "+file+" 2>/dev/null || echo unread")
			if got := strings.TrimSpace(o.out); (got == "a config") != c.read || o.exit != 0 {
				t.Errorf("named by %s, behind a folder of mode %o: exit %d, %q; want it read: %v", by, c.mode, o.exit, got, c.read)
			}
		}
	}
}

// openGiven opens a file as toolrun gives one (O_PATH), closed at the
// test's end.
func openGiven(t *testing.T, path string) Given {
	t.Helper()
	f, err := os.OpenFile(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return Given{Real: path, File: f}
}

// What a root worker's step names is found through no /proc link: one to
// /proc/self/cwd bound the zygote's folder, whatever the step user may
// reach (found attacking).
func TestNamedPathsFollowNoProcLink(t *testing.T) {
	asRootWithAZygote(t)
	link := filepath.Join(mkdirIn(t, "/tmp", 0o755), "here")
	if err := os.Symlink("/proc/self/cwd", link); err != nil {
		t.Fatal(err)
	}
	req := Request{Spec: Defaults}
	req.Spec.Read = []string{link}
	o := runWith(t, req, t.TempDir(), "ls "+link+"/ 2>/dev/null; echo listed")
	if got := strings.TrimSpace(o.out); o.exit != 0 || got != "listed" {
		t.Fatalf("exit %d, %q: want %s unbound", o.exit, got, link)
	}
}
