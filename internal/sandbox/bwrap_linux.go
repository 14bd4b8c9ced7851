package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Command prepares req for bubblewrap: an exec.Cmd (the caller sets its
// stdio, then calls Tree.Start) and the Tree that watches it. Start
// starts a tree the fastest way instead.
func (s *Support) Command(req Request) (*exec.Cmd, *Tree, error) {
	if s.missing != "" {
		return nil, nil, fmt.Errorf("cannot confine: %s", s.missing)
	}
	var cg *cgroup
	if len(s.cgroups) > 0 {
		var err error
		if cg, err = s.takeCgroup(!req.Server); err != nil {
			return nil, nil, err
		}
	}
	return s.command(req, cg)
}

// command is Command in cg (nil: no cgroups). On an error cg is given
// back.
func (s *Support) command(req Request, cg *cgroup) (*exec.Cmd, *Tree, error) {
	t := s.newTree(req, cg, WayBubblewrap)
	// A server's cgroups hold its memory and processes to the limits by
	// the kernel alone (nothing watches them after the step): Stop removes
	// them.
	if err := cg.limit(req.Spec, true); err != nil {
		go cg.remove()
		return nil, nil, fmt.Errorf("cgroup limits: %w", err)
	}
	var err error
	if t.infoR, t.infoW, err = os.Pipe(); err == nil {
		t.blockR, t.blockW, err = os.Pipe()
	}
	if err != nil {
		t.closePipes()
		t.giveBack()
		return nil, nil, err
	}
	files := []*os.File{t.infoW, t.blockR}
	if req.Spec.Network {
		if t.net, err = newTreeNet(req.Outbound, req.Relay); err != nil {
			t.closePipes()
			t.giveBack()
			return nil, nil, err
		}
		files = append(files, t.net.child) // ctlFD
		t.mirrors = len(req.Mirror)
	}
	files = req.handOver(files, 3) // ExtraFiles begin at fd 3
	req = t.prepare(req)
	args := s.bwrapArgs(req)
	if t.filter, err = filterFile(); err != nil {
		t.closePipes()
		t.closeNet()
		t.giveBack()
		return nil, nil, err
	}
	if t.filter != nil {
		files = append(files, t.filter)
		args = append([]string{args[0], "--seccomp", strconv.Itoa(2 + len(files))}, args[1:]...)
	}
	cmd := &exec.Cmd{Path: s.bwrap, Args: args, Dir: req.Dir, Env: envIn(req), ExtraFiles: files}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !req.Server {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	t.cmd = cmd
	return cmd, t, nil
}

// bwrapArgs is the bubblewrap command line: new namespaces (pid, ipc,
// uts, cgroup, net, user unless the worker is root), no capabilities,
// the whole file system read-only with the hidden roots emptied, then the
// tool's folders (mountArgs). A tree with the network reaches it through
// its init (netinit_linux.go), never through the host's namespace.
func (s *Support) bwrapArgs(req Request) []string { return s.bwrapArgsAs(req, os.Geteuid()) }

// bwrapArgsAs is bwrapArgs for a worker of effective uid euid.
func (s *Support) bwrapArgsAs(req Request, euid int) []string {
	// fd 3 and 4 are the tree's info and block pipes (ExtraFiles).
	a := []string{"bwrap", "--info-fd", "3", "--block-fd", "4", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--unshare-cgroup-try", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"}
	if euid == 0 {
		// A root worker's tool is uid 0 of the host, which the kernel lets
		// write any 0644 sysctl without capabilities (kernel.core_pattern
		// is a way to code as root), and bubblewrap's own cover of
		// /proc/sys is skipped when it looks read-only to root: the
		// kernel's settings are bound read-only. A root worker's tools get
		// no user namespace (it costs a millisecond a step and, mapping 0
		// to 0, would not make them less than the host's root).
		a = append(a, "--ro-bind", "/proc/sys", "/proc/sys")
		for _, p := range []string{"/proc/sysrq-trigger", "/proc/fs", "/proc/acpi", "/proc/scsi", "/proc/asound"} {
			a = append(a, "--ro-bind-try", p, p) // what bubblewrap's own cover leaves (it covers irq and bus); the zygote's list is system_mounts's
		}
	} else {
		// Another user's tools cannot write a sysctl (root's files, no
		// capabilities in the user namespace): two mounts a step saved.
		a = append(a, "--unshare-user")
	}
	a = append(a, "--unshare-net")
	if !req.Server {
		a = append(a, "--die-with-parent")
	}
	a = append(a, s.mountArgs(req)...)
	if req.Dir != "" {
		a = append(a, "--chdir", req.Dir)
	}
	return append(append(a, "--"), s.commandIn(req)...)
}

// underInit reports whether req's command runs under capflow's init: a
// server's, and a step's with the network.
func underInit(req Request) bool { return req.Server || req.Spec.Network }

// commandIn is what a tree's sandbox runs, either way: a server's and a
// step's with the network run under capflow's init (init_linux.go), which
// finds its control socket at ctlFD.
func (s *Support) commandIn(req Request) []string {
	if !underInit(req) {
		return req.Argv
	}
	a := []string{s.exe, initArg}
	if req.Spec.Network {
		a = append(a, ctlArg+strconv.Itoa(ctlFD))
		if len(req.Mirror) > 0 {
			ports := make([]string, len(req.Mirror))
			for i, p := range req.Mirror {
				ports[i] = strconv.Itoa(int(p))
			}
			a = append(a, mirrorArg+strings.Join(ports, ","))
		}
	}
	if !req.Server {
		a = append(a, stepArg)
	}
	return append(a, req.Argv...)
}
