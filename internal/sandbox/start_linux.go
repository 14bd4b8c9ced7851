package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// ErrNotAsStepUser is a root worker's step its zygote would not take: it
// is never run as root instead (a manifest that makes a request too large
// for the zygote must not get root's view of the machine).
var ErrNotAsStepUser = errors.New("a root worker runs its steps by its zygote alone (as capflow's step user), and the zygote did not take this one")

// ZygoteEnv set to "off" confines every tree with bubblewrap (a
// comparison, or a machine where the zygote misbehaves).
const ZygoteEnv = "CAPFLOW_SANDBOX_ZYGOTE"

// Stdio are the standard streams of a tree started with Start, as
// exec.Cmd takes them (nil: the null device).
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
	// WaitDelay bounds how long Wait waits for Out and Err once the tree
	// has ended (exec.Cmd.WaitDelay; 0: as long as they stay open).
	WaitDelay time.Duration
}

// Start starts req's tree the fastest way this machine has: forked by a
// zygote (a step, with the network or without), else under bubblewrap
// (servers, a zygote still starting or refusing). A root worker on a
// machine with zygotes never sends a step to bubblewrap, which would run
// it as root where its zygote runs it as the step user: it waits for a
// zygote that is starting, and a step the zygote refuses fails, saying
// why (ErrNotAsStepUser). Tree.Way says which way; Wait waits for the
// tree.
func (s *Support) Start(req Request, std Stdio) (*Tree, error) {
	if s.missing != "" {
		return nil, fmt.Errorf("cannot confine: %s", s.missing)
	}
	var cg *cgroup
	if len(s.cgroups) > 0 {
		var err error
		if cg, err = s.takeCgroup(!req.Server); err != nil {
			return nil, err
		}
	}
	why := "a server"
	if !req.Server {
		// Decided before any zygote answered (capflow tools run has none
		// started, a worker's first may have failed): not by its answer.
		strict := s.rootSteps()
		if req.zygoteWait || strict {
			s.waitZygote(cg)
		}
		// A machine the first zygote found unable to lay a step out (an
		// old kernel) has none: its steps are bubblewrap's.
		strict = strict && s.zygotes()
		t, err := s.spawn(req, std, cg)
		if err == nil {
			return t, nil
		}
		if strict {
			s.release(cg)
			return nil, fmt.Errorf("%w: %v", ErrNotAsStepUser, err)
		}
		why = err.Error()
	}
	cmd, t, err := s.command(req, cg)
	if err != nil {
		return nil, err
	}
	t.why = why
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.WaitDelay = std.In, std.Out, std.Err, std.WaitDelay
	return t, t.Start()
}

// rootSteps reports whether this is a root worker whose steps are its
// zygotes' alone: a machine with zygotes (a build with cgo, a kernel
// that lays a step out, CAPFLOW_SANDBOX_ZYGOTE not off).
func (s *Support) rootSteps() bool {
	return os.Geteuid() == 0 && s.zygotes()
}

// zygoteOf is the zygote that forks a step in cg: the set's, or the
// Support's own where there are no cgroups (started the first time).
func (s *Support) zygoteOf(cg *cgroup) *zygote {
	if cg != nil {
		return cg.zygote
	}
	if len(s.cgroups) > 0 {
		return nil // a set taken where cgroups are: its own or none
	}
	s.zygoteMu.Lock()
	defer s.zygoteMu.Unlock()
	if s.zygoteThread == nil {
		s.zygoteThread, _ = newForker(nil) // it stays: the steps' parent
		if s.zygoteThread != nil {
			s.zygote = startZygote(s, s.zygoteThread)
		}
	}
	s.zygote = renew(s.zygote, s, s.zygoteThread)
	return s.zygote
}

// zygoteFor is cg's zygote when it can take a step now, or why not.
func (s *Support) zygoteFor(cg *cgroup) (*zygote, error) {
	if off := s.zygoteOff.Load(); off != nil {
		return nil, errors.New(*off)
	}
	z := s.zygoteOf(cg)
	if !z.usable() {
		return nil, errors.New("the zygote is starting")
	}
	if err := s.refuseAsRoot(z); err != nil {
		return nil, err
	}
	return z, nil
}

// Warm starts a zygote before the first step and waits for it (a worker
// calls it as it starts): its first steps are the zygote's, and Summary
// says whether this machine has zygotes at all.
func (s *Support) Warm() {
	if s.missing != "" || !s.zygotes() {
		return
	}
	var cg *cgroup
	if len(s.cgroups) > 0 {
		var err error
		if cg, err = s.takeCgroup(true); err != nil {
			return
		}
		defer s.release(cg)
	}
	s.waitZygote(cg)
}

// waitZygote waits until cg's zygote has started or failed.
func (s *Support) waitZygote(cg *cgroup) {
	if z := s.zygoteOf(cg); z != nil {
		<-z.ready
	}
}

// spawn starts req's tree through a zygote. An error has started nothing
// (cg is the caller's still).
func (s *Support) spawn(req Request, std Stdio, cg *cgroup) (*Tree, error) {
	z, err := s.zygoteFor(cg)
	if err != nil {
		return nil, err
	}
	t := s.newTree(req, cg, WayZygote)
	req = t.prepare(req)
	files, err := t.stdio(std)
	if err != nil {
		return nil, err
	}
	defer t.closeChildEnds()
	files = req.handOver(files, 0) // the zygote numbers them in the request
	if req.Spec.Network {
		if t.net, err = newTreeNet(req.Outbound, req.Relay); err != nil {
			t.closeParentEnds()
			return nil, err
		}
		t.mirrors, req.ctl = len(req.Mirror), len(files)
		files = append(files, t.net.child) // at ctlFD in the sandbox
	}
	if len(files) < zygoteFiles { // a request with no room for it stays the zygote's
		if ns := s.nets.take(); ns != nil {
			defer ns.Close() // the zygote has its own once sent
			req.netns, files = len(files), append(files, ns)
		}
	}
	words, err := s.zygoteWords(req, t.limits)
	if err == nil && len(files) > zygoteFiles {
		err = errTooLarge
	}
	if err == nil {
		err = cg.limit(req.Spec, false)
	}
	if err != nil {
		t.closeParentEnds()
		t.closeNet()
		return nil, err
	}
	var pid int
	var mounts *os.File
	if err = s.refuseAsRoot(z); err == nil {
		pid, mounts, err = z.spawn(words, files)
	}
	if pid > 0 {
		t.proc, _ = os.FindProcess(pid) // our child: its pid stays ours until we wait
	}
	if err != nil {
		if t.proc != nil { // its setup failed, or the zygote ended: it never starts the tool
			_ = t.proc.Kill()
			_, _ = t.proc.Wait()
		}
		t.closeParentEnds()
		t.closeNet()
		if req.netns > 0 && strings.Contains(err.Error(), netnsRefused) {
			s.nets.off() // this system lets a step make a namespace, not enter one made for it
		}
		return nil, fmt.Errorf("the zygote: %w", err)
	}
	t.streams.feed() // stdin is read only now: bubblewrap gets it whole otherwise
	t.init, t.mounts = pid, mounts
	if t.net != nil {
		go t.net.run(t.mirrors)
	}
	t.watchLimits()
	return t, nil
}

// newTree is a tree of req's in cg, confined by way.
func (s *Support) newTree(req Request, cg *cgroup, way string) *Tree {
	t := &Tree{sup: s, cg: cg, spec: req.Spec, server: req.Server, stop: make(chan struct{}), began: time.Now(), way: way,
		writable: append(append([]string(nil), req.Write...), req.Spec.Write...)}
	t.limits, t.asLimit = rlimits(req.Spec, cg, req.Server)
	return t
}

// prepare is req as either way confines it: the host's key lists hidden
// (/proc/keys lists root's for a root worker's tool, whatever keyctl
// says), a step marked as this worker's (SweepOrphans).
func (t *Tree) prepare(req Request) Request {
	req.Hide = append(slices.Clone(req.Hide), "/proc/keys", "/proc/key-users")
	if mark := workerMark(); mark != "" && !req.Server {
		req.Env = append(slices.Clone(req.Env), WorkerEnv+"="+mark)
	}
	return req
}

// Way says how the tree is confined: WayZygote or WayBubblewrap, and for
// bubblewrap why the zygote did not take it.
func (t *Tree) Way() string {
	if t.way == WayBubblewrap && t.why != "" {
		return WayBubblewrap + " (" + t.why + ")"
	}
	return t.way
}

// Wait waits for the tree's end and its streams (up to WaitDelay), and
// says how it ended as exec.Cmd.Wait does.
func (t *Tree) Wait() (exit int, err error) {
	if t.cmd != nil {
		err = t.cmd.Wait()
		return t.cmd.ProcessState.ExitCode(), err
	}
	st, err := t.proc.Wait()
	t.reaped.Store(true)
	if err != nil {
		return -1, err
	}
	t.waitStreams()
	if !st.Success() {
		err = &exec.ExitError{ProcessState: st}
	}
	return st.ExitCode(), err
}
