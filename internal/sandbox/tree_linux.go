package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Tree is a confined process tree: its bubblewrap process or the
// zygote's init, its cgroups.
type Tree struct {
	sup    *Support
	cmd    *exec.Cmd
	cg     *cgroup
	spec   Spec
	server bool
	limits []rlimit
	init   int // the sandbox's init (bubblewrap's child), once known
	// bubblewrap reports its child on infoW, and waits on blockR before
	// it runs the tool.
	infoR, infoW, blockW, blockR *os.File
	asLimit                      bool     // memory limited per process (no memory cgroup)
	writable                     []string // where the tree could write
	began                        time.Time
	stop                         chan struct{}
	stopOnce                     sync.Once
	ended                        atomic.Bool // bubblewrap exited: nothing of the tree is signalled any more
	mu                           sync.Mutex
	breach                       *Breach
	// watching is the watch goroutine, done before the cgroups are reused.
	watching sync.WaitGroup
	// net is the control socket of a tree with the network (nil without),
	// mirrors the ports the init is to hand over.
	net     *treeNet
	mirrors int
	// filter is the pipe bubblewrap reads the seccomp filter from.
	filter *os.File
	// after runs once Start has returned (AfterStart).
	after []func()
	// way confines the tree (WayZygote, WayBubblewrap), why says why a
	// step is not the zygote's.
	way, why string
	// proc is a zygote tree's init (cmd is bubblewrap's), reaped once
	// waited for; streams its standard streams.
	proc    *os.Process
	reaped  atomic.Bool
	streams *streams
	// mounts holds a zygote tree's mount namespace (nil: none held). The
	// last process of a mount namespace to exit undoes its mounts and
	// waits for an RCU grace period before its parent hears of it: about
	// 0.15 ms of every confined step here (docs/sandbox.md). Held, the
	// init's exit does not wait, and Finish drops the namespace off the
	// step's path: it outlives the tree's processes by that, and no
	// process can enter it meanwhile.
	mounts *os.File
}

// AfterStart runs f once Start has returned, whether the tree started or
// not: what only bubblewrap's start needed (handles it holds copies of).
func (t *Tree) AfterStart(f func()) { t.after = append(t.after, f) }

// Start starts the tree's bubblewrap, in the tree's cgroups when their
// forker can (cgroup.start), and finishes the start (started). On an
// error nothing of the tree runs and its cgroups are given back.
func (t *Tree) Start() error {
	defer func() {
		for _, f := range t.after {
			f()
		}
	}()
	keepInheritedOut()
	if err := t.cg.start(t.cmd); err != nil {
		t.Abort()
		return err
	}
	if err := t.started(); err != nil {
		_ = t.cmd.Wait()
		t.Abort()
		return err
	}
	return nil
}

// started finishes the start: bubblewrap has made the sandbox's init and
// waits (its block fd) while the init joins the tree's cgroups (unless
// born in them) and gets its rlimits, so everything the tool forks is
// counted from its first instruction; then the tool runs, and the
// cgroups are watched: a tree that passes a limit is stopped at once. An
// error has killed the tree (before bubblewrap could go on).
func (t *Tree) started() error {
	t.infoW.Close()
	t.blockR.Close()
	if err := t.handshake(); err != nil {
		t.Kill()
		t.closePipes()
		return fmt.Errorf("sandbox: %w", err)
	}
	t.closePipes()
	if t.net != nil {
		go t.net.run(t.mirrors)
	}
	t.watchLimits()
	return nil
}

// watchLimits watches a step's cgroups: a tree that passes a limit is
// stopped at once.
func (t *Tree) watchLimits() {
	if t.cg != nil && !t.server {
		t.watching.Add(1)
		go t.watch()
	}
}

func (t *Tree) handshake() error {
	_ = t.infoR.SetReadDeadline(time.Now().Add(30 * time.Second))
	var info struct {
		Child int `json:"child-pid"`
	}
	if err := json.NewDecoder(t.infoR).Decode(&info); err != nil || info.Child <= 0 {
		return fmt.Errorf("bubblewrap did not report its child: %v", err)
	}
	t.init = info.Child
	if t.cg != nil && t.cg.forker == nil {
		if err := t.cg.join(info.Child); err != nil {
			return err
		}
	}
	for _, l := range t.limits {
		if err := unix.Prlimit(info.Child, l.Resource, &unix.Rlimit{Cur: l.Cur, Max: l.Max}, nil); err != nil {
			return fmt.Errorf("rlimit %d: %w", l.Resource, err)
		}
	}
	_, err := t.blockW.Write([]byte{1})
	return err
}

// closePipes closes the handshake's pipes (again: errors ignored).
func (t *Tree) closePipes() {
	for _, f := range []*os.File{t.infoR, t.infoW, t.blockW, t.blockR, t.filter} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// closeNet ends the tree's way to the network (a tree that never ran, or
// whose bubblewrap exited).
func (t *Tree) closeNet() {
	if t.net != nil {
		_ = t.net.child.Close()
		t.net.close()
	}
}

// Abort undoes a tree that never ran (a failed Start). A step's cgroups go back to the pool, a server's
// are removed.
func (t *Tree) Abort() {
	t.ended.Store(true)
	t.stopOnce.Do(func() { close(t.stop) })
	t.closePipes()
	t.closeNet()
	t.watching.Wait()
	t.giveBack()
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
	if t.breach == nil {
		t.breach = b
	}
}

// Pid is the tree's outermost process: bubblewrap's, or a zygote tree's
// init.
func (t *Tree) Pid() int {
	if t.cmd == nil {
		return t.init
	}
	return t.cmd.Process.Pid
}

// Terminate asks every process of the tree to stop (SIGTERM), and kills
// the tree after grace unless done closes first.
func (t *Tree) Terminate(grace time.Duration, done <-chan struct{}) {
	switch {
	case t.ended.Load() || t.reaped.Load():
	case t.cmd == nil:
		// The zygote's init passes it on to the rest of its namespace
		// (zygote_main_linux.c): by its pidfd, never another process.
		_ = t.proc.Signal(syscall.SIGTERM)
	default:
		signalMembers(t.init, syscall.SIGTERM)
	}
	select {
	case <-done:
	case <-time.After(grace):
		t.Kill()
	}
}

// Kill kills the whole tree now: the sandbox's init, which takes its PID
// namespace with it, and bubblewrap (through exec's handle: never a pid
// reused since).
func (t *Tree) Kill() {
	if t.ended.Load() || t.reaped.Load() {
		return
	}
	if t.cmd == nil {
		_ = t.proc.Kill() // by its pidfd: never another process
		return
	}
	if t.init > 0 && ownNamespace(t.init) {
		_ = syscall.Kill(t.init, syscall.SIGKILL)
	}
	_ = t.cmd.Process.Kill()
}

// Finish is called once the tree's bubblewrap has exited (status as
// exec reports it, the stderr tail): it says which limit the tree
// passed, if any, then gives the cgroups back (release): everything of
// this tree's that reads them comes before.
func (t *Tree) Finish(exit int, tail string) *Breach {
	t.ended.Store(true)
	t.stopOnce.Do(func() { close(t.stop); t.closePipes() })
	t.closeNet()
	t.watching.Wait()
	if b := t.cg.breach(t.spec); b != nil {
		t.record(b)
	}
	t.mu.Lock()
	if t.breach == nil {
		t.breach = t.fromExit(exit, tail)
	}
	b := t.breach
	t.mu.Unlock()
	if t.mounts == nil {
		t.sup.release(t.cg)
		return b
	}
	// The namespace goes before its cgroups do: what its /tmp holds is
	// charged to them until then, and the next tree in them starts clean.
	t.sup.pool.releasing.Add(1)
	go func() {
		defer t.sup.pool.releasing.Done()
		_ = t.mounts.Close()
		t.sup.release(t.cg)
	}()
	return b
}

// handOver appends the write folders' handles to files, each folder once
// and only those the spec writes, then the given files' that lie in a
// hidden folder, and notes each one's number as the tree reads it: base +
// its index. What is handed over is bound (mountArgs), and nothing else
// is: bubblewrap passes a handle no option names on to the tool, which
// reopens it writable through /proc/self/fd (found attacking).
func (r *Request) handOver(files []*os.File, base int) []*os.File {
	r.bindFDs = map[string]int{}
	for _, f := range r.Folders {
		if _, dup := r.bindFDs[f.Real]; !dup && slices.Contains(r.Spec.Write, f.Real) {
			r.bindFDs[f.Real] = base + len(files)
			files = append(files, f.Dir)
		}
	}
	hidden := hiddenRoots()
	for _, g := range r.Given {
		if _, dup := r.bindFDs[g.Real]; !dup && covered(g.Real, hidden) {
			r.bindFDs[g.Real] = base + len(files)
			files = append(files, g.File)
		}
	}
	return files
}

// giveBack gives the cgroups of a tree that never ran back: a step's to
// the pool, a server's removed.
func (t *Tree) giveBack() {
	if t.server {
		go t.cg.remove()
		return
	}
	t.sup.release(t.cg)
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
