package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Request is one process tree to confine.
type Request struct {
	Argv []string
	Dir  string
	Env  []string
	// Read are folders the tree reads beyond the system (the project, the
	// tool's folder); Write the ones it writes (the step folder). Hide are
	// files or folders it must not see at all (the worker's keys).
	Read, Write, Hide []string
	Spec              Spec
	// Server: the tree outlives the process that started it (no
	// die-with-parent) and lives as long as any of its processes does.
	Server bool
}

// Tree is a confined process tree: its bubblewrap process, its cgroups.
type Tree struct {
	sup    *Support
	cmd    *exec.Cmd
	cg     *cgroup
	spec   Spec
	limits []rlimit
	init   int // the sandbox's init (bubblewrap's child), once known
	// The info pipe (bubblewrap reports its child) and the block pipe
	// (bubblewrap waits on it before it runs the tool).
	info, infoW, block, blockR *os.File
	rlim                       bool     // memory limited per process (no memory cgroup)
	write                      []string // where the tree could write
	stop                       chan struct{}
	once                       sync.Once
	mu                         sync.Mutex
	found                      *Breach
	// watching is the watch goroutine, done before the cgroups are reused.
	watching sync.WaitGroup
}

// Command prepares req: an exec.Cmd of bubblewrap (the caller sets its
// stdio, starts it, then calls Started) and the Tree that watches it.
func (s *Support) Command(req Request) (*exec.Cmd, *Tree, error) {
	if s.missing != "" {
		return nil, nil, fmt.Errorf("cannot confine: %s", s.missing)
	}
	t := &Tree{sup: s, spec: req.Spec, stop: make(chan struct{}), write: append(append([]string(nil), req.Write...), req.Spec.Write...)}
	// A server's cgroups hold its memory and processes to the limits by
	// the kernel alone (nothing watches them after the step): Stop removes
	// them.
	if len(s.cgroups) > 0 {
		cg, err := s.newCgroup(req.Spec, !req.Server)
		if err != nil {
			return nil, nil, err
		}
		t.cg = cg
	}
	t.limits, t.rlim = rlimits(req.Spec, t.cg, req.Server)
	var err error
	if t.info, t.infoW, err = os.Pipe(); err == nil {
		t.blockR, t.block, err = os.Pipe()
	}
	if err != nil {
		t.closePipes()
		t.cg.remove()
		return nil, nil, err
	}
	args := s.bwrapArgs(req)
	cmd := &exec.Cmd{Path: s.bwrap, Args: args, Dir: req.Dir, Env: req.Env, ExtraFiles: []*os.File{t.infoW, t.blockR}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !req.Server {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	t.cmd = cmd
	return cmd, t, nil
}

// rlimits are the per-process limits: file size always; CPU time per
// process as a backstop of the cgroup's; memory as address space only
// where no memory cgroup counts the tree, and only when declared: an
// address-space limit breaks runtimes that reserve more than they use
// (V8, the JVM).
func rlimits(spec Spec, cg *cgroup, server bool) ([]rlimit, bool) {
	var out []rlimit
	if spec.FileSize > 0 {
		out = append(out, rlimit{unix.RLIMIT_FSIZE, uint64(spec.FileSize), uint64(spec.FileSize)})
	}
	if spec.CPU > 0 && !server {
		sec := uint64(spec.CPU.Seconds() + 0.999)
		out = append(out, rlimit{unix.RLIMIT_CPU, sec, sec + 5})
	}
	byAS := spec.Memory > 0 && spec.Memory != Defaults.Memory && !cg.has("memory")
	if byAS {
		out = append(out, rlimit{unix.RLIMIT_AS, uint64(spec.Memory), uint64(spec.Memory)})
	}
	return out, byAS
}

// bwrapArgs is the bubblewrap command line: every namespace new (user,
// pid, ipc, uts, cgroup, and net unless the tool declared network), no
// capabilities, the whole file system read-only with /tmp private, then
// the tool's folders bound over it.
func (s *Support) bwrapArgs(req Request) []string {
	// fd 3 and 4 are the tree's info and block pipes (ExtraFiles).
	a := []string{"bwrap", "--info-fd", "3", "--block-fd", "4", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--unshare-cgroup-try", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"}
	// A user namespace is how bubblewrap works without privileges; a root
	// worker's tools get none (it costs a millisecond a step): without
	// capabilities and with no_new_privs, root in the sandbox can change
	// nothing the read-only binds protect either way.
	if os.Geteuid() != 0 {
		a = append(a, "--unshare-user")
	}
	if !req.Spec.Network {
		a = append(a, "--unshare-net")
	}
	if !req.Server {
		a = append(a, "--die-with-parent")
	}
	for _, p := range req.Hide {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			a = append(a, "--tmpfs", p)
		} else if err == nil {
			a = append(a, "--ro-bind", "/dev/null", p)
		}
	}
	read := append(append(append([]string(nil), req.Read...), pathDirs(req.Env)...), req.Spec.Read...)
	if req.Server {
		read = append(read, s.exe) // the init below
	}
	for _, p := range underTmp(read) {
		a = append(a, "--ro-bind-try", p, p)
	}
	for _, p := range append(append([]string(nil), req.Write...), req.Spec.Write...) {
		a = append(a, "--bind", p, p)
	}
	if req.Dir != "" {
		a = append(a, "--chdir", req.Dir)
	}
	a = append(a, "--")
	if req.Server {
		a = append(a, s.exe, initArg)
	}
	return append(a, req.Argv...)
}

// underTmp keeps the paths the private /tmp hides, each once: the rest
// of the file system is readable already, and every bind is a mount to
// make and tear down (a millisecond a step for a long PATH).
func underTmp(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		p = filepath.Clean(p)
		if (p == "/tmp" || strings.HasPrefix(p, "/tmp/")) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// pathDirs are the folders on the tree's PATH: programs the worker could
// run stay runnable where the sandbox hides their folder (/tmp).
func pathDirs(env []string) []string {
	var out []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(v) {
				if filepath.IsAbs(d) {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// Started finishes the start: bubblewrap has made the sandbox's init and
// waits (its block fd) while the init joins the tree's cgroups and gets
// its rlimits, so everything the tool forks is counted from its first
// instruction; then the tool runs, and the cgroups are watched: a tree
// that passes a limit is stopped at once. An error has killed the tree.
func (t *Tree) Started() error {
	t.infoW.Close()
	t.blockR.Close()
	err := t.handshake()
	t.info.Close()
	t.block.Close()
	if err != nil {
		t.Kill()
		return fmt.Errorf("sandbox: %w", err)
	}
	if t.cg != nil && !t.server() {
		t.watching.Add(1)
		go t.watch()
	}
	return nil
}

func (t *Tree) handshake() error {
	_ = t.info.SetReadDeadline(time.Now().Add(30 * time.Second))
	var info struct {
		Child int `json:"child-pid"`
	}
	if err := json.NewDecoder(t.info).Decode(&info); err != nil || info.Child <= 0 {
		return fmt.Errorf("bubblewrap did not report its child: %v", err)
	}
	t.init = info.Child
	if t.cg != nil {
		if err := t.cg.join(info.Child); err != nil {
			return err
		}
	}
	for _, l := range t.limits {
		if err := unix.Prlimit(info.Child, l.Resource, &unix.Rlimit{Cur: l.Cur, Max: l.Max}, nil); err != nil {
			return fmt.Errorf("rlimit %d: %w", l.Resource, err)
		}
	}
	_, err := t.block.Write([]byte{1})
	return err
}

func (t *Tree) server() bool { return t.cmd.SysProcAttr.Pdeathsig == 0 }

func (t *Tree) closePipes() {
	for _, f := range []*os.File{t.info, t.infoW, t.block, t.blockR} {
		if f != nil {
			f.Close()
		}
	}
}

func (t *Tree) watch() {
	defer t.watching.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			if b := t.cg.breach(t.spec); b != nil {
				t.record(b)
				t.Kill()
				return
			}
		}
	}
}

func (t *Tree) record(b *Breach) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.found == nil {
		t.found = b
	}
}

// Pid is the bubblewrap process's pid (the tree's outermost process).
func (t *Tree) Pid() int { return t.cmd.Process.Pid }

// Terminate asks every process of the tree to stop (SIGTERM), and kills
// the tree after grace unless done closes first.
func (t *Tree) Terminate(grace time.Duration, done <-chan struct{}) {
	signalMembers(t.Pid(), syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		t.Kill()
	}
}

// Kill kills the whole tree now.
func (t *Tree) Kill() { killTree(t.Pid()) }

// Finish is called once the tree's bubblewrap has exited (status as
// exec reports it, the stderr tail): it says which limit the tree
// passed, if any, and removes the cgroups with anything left in them.
func (t *Tree) Finish(exit int, tail string) *Breach {
	t.once.Do(func() { close(t.stop); t.closePipes() })
	t.watching.Wait() // the cgroups go back to the pool: nothing may read them for this tree
	if b := t.cg.breach(t.spec); b != nil {
		t.record(b)
	}
	t.sup.release(t.cg)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.found != nil {
		return t.found
	}
	return t.fromExit(exit, tail)
}
