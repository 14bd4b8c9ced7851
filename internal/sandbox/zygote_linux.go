package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// zygoteArg, as the first argument, makes this executable a zygote
// (zygote_main_linux.c, entered before Go's runtime starts).
const zygoteArg = "--capflow-zygote"

// zygoteMax is the largest request a zygote reads (ZMSG), zygoteFiles the
// most descriptors (ZFDS): a step past either runs under bubblewrap.
const (
	zygoteMax   = 256 << 10
	zygoteFiles = 64
)

// Ways a step is confined (Tree.Way).
const (
	WayZygote     = "zygote"
	WayBubblewrap = "bubblewrap"
)

// zygote is one zygote process: it forks each step of its cgroup set into
// fresh namespaces, each a read-only copy of the machine's mounts. It serves one
// request at a time.
type zygote struct {
	mu    sync.Mutex
	conn  *net.UnixConn
	cmd   *exec.Cmd
	ready chan struct{} // closed once started (err says how)
	err   error
	dead  atomic.Bool   // asked nothing more
	proc  atomic.Int64  // its pid, once started
	ended chan struct{} // closed once it has exited
	// stepUser: it runs a root worker's steps as StepID (it said so).
	stepUser bool
}

// startZygote starts a zygote in the background from f's thread (born in
// f's cgroups), ready once it has laid out a step's namespaces and file
// system. One that cannot, before any could, turns the zygotes of s off:
// this machine will not have them.
func startZygote(s *Support, f *forker) *zygote {
	z := &zygote{ready: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		z.err = z.start(s.exe, f)
		switch {
		case z.stepUser:
			s.stepUser.Store(true)
		case z.err == nil && s.stepUser.Load():
			// The worker's steps run as the step user: a zygote that would
			// run them as root serves none.
			z.err = errNotStepUsers
		}
		if z.err == nil {
			s.zygoteUp.Store(true)
		} else if errors.Is(z.err, errLayout) && !s.zygoteUp.Load() {
			why := z.err.Error()
			s.zygoteOff.CompareAndSwap(nil, &why)
		}
		close(z.ready)
	}()
	return z
}

// filterMade makes the filter a zygote is started with (a test's own
// where it checks what the zygote does with a bad one).
var filterMade = filterFile

// zygoteFilter is what a zygote reads its steps' seccomp filter from
// (made by made, filterFile): empty where this architecture has none
// (seccomp_linux.go), never because it could not be made (a worker out
// of descriptors: its steps would have run unfiltered, found attacking).
func zygoteFilter(made func() (*os.File, error)) (*os.File, error) {
	filter, err := made()
	if err != nil {
		return nil, fmt.Errorf("the seccomp filter: %w", err)
	}
	if filter == nil {
		return os.Open(os.DevNull)
	}
	return filter, nil
}

// errNotStepUsers is a zygote that would run a root worker's steps as
// root where its others run them as the step user.
var errNotStepUsers = errors.New("this zygote cannot run steps as the step user, as the worker's others do")

// refuseAsRoot ends z and says why when it would run a step as root for a
// worker whose steps run as the step user: one that started before
// another could (its own user namespaces failed), checked as it is taken
// and again right before each request, since another may have come up
// between (found attacking). Its set gets a new one.
func (s *Support) refuseAsRoot(z *zygote) error {
	if !s.stepUser.Load() || z.stepUser {
		return nil
	}
	z.mu.Lock()
	z.end()
	z.mu.Unlock()
	return errNotStepUsers
}

// errLayout is a zygote that could not lay out a step.
var errLayout = errors.New("the zygote cannot lay out a step's namespaces and file system")

func (z *zygote) start(exe string, f *forker) error {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "zygote"), os.NewFile(uintptr(pair[1]), "zygote")
	closeTheirs := sync.OnceFunc(func() { theirs.Close() })
	defer closeTheirs()
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return err
	}
	z.conn = c.(*net.UnixConn)
	// A request is one message, which must fit the socket's send buffer
	// (212,992 bytes by default, under zygoteMax; the kernel doubles what
	// is set, up to twice net.core.wmem_max).
	_ = z.conn.SetWriteBuffer(zygoteMax + 4096)
	filter, err := zygoteFilter(filterMade)
	if err != nil { // never a zygote whose steps would have no filter
		z.conn.Close()
		close(z.ended)
		return err
	}
	defer filter.Close()
	// Its parent is f's thread: the zygote (and every step's init, the
	// worker's child) is killed when that thread ends. In "/", never the
	// worker's folder: a step's init starts there (found attacking: a
	// read: through a link to /proc/self/cwd led to it).
	z.cmd = &exec.Cmd{Path: exe, Args: []string{exe, zygoteArg}, Env: []string{}, ExtraFiles: []*os.File{theirs, filter}, Dir: "/",
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	err = f.start(z.cmd)
	// The zygote has its end now: with this one closed, a zygote that
	// exits at once is read as the socket's end, not after 10 s of waiting.
	closeTheirs()
	if err != nil {
		z.conn.Close()
		close(z.ended)
		return err
	}
	z.proc.Store(int64(z.cmd.Process.Pid))
	go func() {
		_ = z.cmd.Wait()
		close(z.ended)
	}()
	reply, _, err := z.read(10 * time.Second)
	z.stepUser = reply == "ready step-user" // a root worker's steps run as StepID (zygote_ids_linux.c)
	if err == nil && reply != "ready" && !z.stepUser {
		err = fmt.Errorf("%w: %s", errLayout, strings.TrimPrefix(reply, "err 0 "))
	}
	if err != nil {
		z.stop()
		return fmt.Errorf("the zygote did not start: %w", err)
	}
	return nil
}

// usable reports whether the zygote is ready to take a step now (one
// still starting is not waited for: that step runs under bubblewrap).
func (z *zygote) usable() bool {
	started, ok := z.state()
	return started && ok
}

// state says whether the zygote has started (or failed to), and if so
// whether it still serves: one that exited since (killed by the OOM
// killer when a step filled its cgroup's memory, say) does not, and its
// set gets a new one (renew) rather than failing its next step.
func (z *zygote) state() (started, ok bool) {
	if z == nil {
		return false, false
	}
	select {
	case <-z.ready:
		return true, z.err == nil && !z.dead.Load() && z.present()
	default:
		return false, false
	}
}

func (z *zygote) read(timeout time.Duration) (string, *os.File, error) {
	_ = z.conn.SetReadDeadline(time.Now().Add(timeout))
	buf, oob := make([]byte, 1024), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := z.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return "", nil, err
	}
	return string(buf[:n]), handedOver(oob[:oobn]), nil
}

// handedOver is the one descriptor a zygote's answer carries (a step's
// mount namespace), nil without one; any other is closed.
func handedOver(oob []byte) *os.File {
	msgs, _ := unix.ParseSocketControlMessage(oob)
	var f *os.File
	for _, m := range msgs {
		fds, _ := unix.ParseUnixRights(&m)
		for _, fd := range fds {
			if f == nil {
				f = os.NewFile(uintptr(fd), "mount namespace")
			} else {
				unix.Close(fd)
			}
		}
	}
	return f
}

// spawn asks for one step: words (zygoteWords) with files (stdin,
// stdout, stderr, then the folders bound by descriptor). pid is the
// step's init, a child of this process to end and wait for, even with an
// error (its setup failed, or the zygote ended); mounts its mount
// namespace (Tree.mounts), when the step started.
func (z *zygote) spawn(words []byte, files []*os.File) (pid int, mounts *os.File, err error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.dead.Load() {
		return 0, nil, errors.New("the zygote has ended")
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	_ = z.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := z.conn.WriteMsgUnix(words, unix.UnixRights(fds...), nil); err != nil {
		if errors.Is(err, unix.EMSGSIZE) { // nothing was sent: the step is bubblewrap's, the zygote stays
			return 0, nil, errTooLarge
		}
		z.end()
		return 0, nil, err
	}
	// "pid N" first where it started an init: one the caller ends and
	// reaps whatever follows (its tool waits for the answer to start).
	reply, mounts, err := z.read(30 * time.Second)
	cloned := 0
	if num, ok := strings.CutPrefix(reply, "pid "); err == nil && ok {
		if cloned, _ = strconv.Atoi(num); !stepInit(cloned) {
			cloned = 0
		}
		reply, mounts, err = z.read(30 * time.Second)
	}
	if err != nil {
		z.end() // a zygote that does not answer is never asked again
		return cloned, nil, err
	}
	word, rest, _ := strings.Cut(reply, " ")
	num, why, _ := strings.Cut(rest, " ")
	if pid, _ = strconv.Atoi(num); word == "ok" && pid > 0 && pid == cloned {
		return pid, mounts, nil
	}
	if mounts != nil {
		mounts.Close()
	}
	if word == "err" && pid == cloned {
		return pid, nil, errors.New(why)
	}
	// Never a step this worker does not know of, nor one that is not its
	// init (found attacking: "ok 0" made a tree with no process). An init
	// answered for but not named first is ended and reaped all the same.
	z.end()
	err = fmt.Errorf("the zygote answered %q after %q", reply, "pid "+strconv.Itoa(cloned))
	if cloned == 0 && stepInit(pid) {
		cloned = pid
	}
	return cloned, nil, err
}

// stepInit reports whether pid is what a zygote's word may name: a child
// of this process (CLONE_PARENT) that is the first of its own PID
// namespace. The worker ends and reaps nothing else for a zygote (found
// attacking: it would have killed any process named). Whether it is a
// child needs no descriptor (waitid, not waiting); a child whose /proc
// the worker cannot read (out of descriptors; hidden, as a non-dumpable
// init is under hidepid) is taken at the zygote's word, rather than left
// running unknown (found attacking).
func stepInit(pid int) bool {
	var info unix.Siginfo
	if pid <= 0 || unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil) != nil {
		return false
	}
	n, err := nsPid(pid) // 1 only for a namespace's first: the machine's own is no child of ours
	return err != nil || n == 1
}

// end kills a zygote that failed (z.mu held): what it started is the
// worker's, and its cgroups', to end.
func (z *zygote) end() {
	z.dead.Store(true)
	if z.cmd != nil && z.cmd.Process != nil {
		_ = z.cmd.Process.Kill()
	}
}

// broken reports whether the zygote has ended or failed: it is asked
// nothing more, and its set gets a new one (renew).
func (z *zygote) broken() bool {
	started, ok := z.state()
	return started && !ok
}

// renew is z, or a new zygote from f where z is broken and s still has
// zygotes (a zygote killed by a step's setup, say, is not the set's
// last).
func renew(z *zygote, s *Support, f *forker) *zygote {
	if !z.broken() || !s.zygotes() || f == nil {
		return z
	}
	z.stop()
	return startZygote(s, f)
}

// pid is the zygote's process (0 before it started).
func (z *zygote) pid() int {
	if z == nil {
		return 0
	}
	return int(z.proc.Load())
}

// present reports whether the zygote's process may be in its cgroups: it
// starts, runs, or has not been seen to exit.
func (z *zygote) present() bool {
	if z == nil {
		return false
	}
	select {
	case <-z.ended:
		return false
	default:
		return true
	}
}

// wait waits up to d for the zygote to exit.
func (z *zygote) wait(d time.Duration) {
	<-z.ready
	select {
	case <-z.ended:
	case <-time.After(d):
	}
}

// stop ends the zygote: it exits when its socket closes.
func (z *zygote) stop() {
	if z == nil {
		return
	}
	z.mu.Lock()
	z.dead.Store(true)
	if z.conn != nil {
		z.conn.Close()
	}
	z.mu.Unlock()
}
