package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// A confined tree runs under a seccomp filter that bubblewrap loads last
// (--seccomp), whatever the worker's uid: the calls below fail with EPERM.
// Without it, a root worker's tool is uid 0 of the host with no
// capabilities, which the kernel still lets read and plant keys in root's
// keyrings (keyctl needs none), load BPF or open perf events where the
// machine's settings allow it; a tree may also not make namespaces of its
// own (a user namespace would give it capabilities there), mount, load
// modules, reboot or swap. clone3 answers ENOSYS (its flags lie in memory
// the filter cannot read), and C libraries fall back to clone, whose
// namespace flags are checked. A process of another architecture (32-bit
// code on a 64-bit host) gets ENOSYS for everything: it would otherwise
// reach the same calls under other numbers.
var denied = []uint32{
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN,
	unix.SYS_USERFAULTFD, unix.SYS_IO_URING_SETUP, unix.SYS_PIDFD_GETFD, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_PTRACE,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF,
}

// cloneNamespaces are clone's flags that make namespaces.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// A tool owns what it creates, so without a check it could leave a
// set-uid or set-gid program in its step or write folders: on the host,
// outside the sandbox's nosuid mounts, anyone who runs it would become
// the worker's user (root, for a root worker). The calls that set a
// file's mode refuse those bits with EPERM; open and openat only when
// they create (their mode is junk otherwise). openat2 answers ENOSYS: its
// mode lies in memory the filter cannot read (C libraries' open uses
// openat).
const setID = unix.S_ISUID | unix.S_ISGID

// modeCall is a call that sets a file's mode: which argument holds it,
// and which its open flags (-1: it always sets the mode).
type modeCall struct {
	nr          uint32
	mode, flags int
}

var modeCalls = append([]modeCall{
	{unix.SYS_OPENAT, 3, 2}, {unix.SYS_MKNODAT, 2, -1}, {unix.SYS_FCHMOD, 1, -1},
	{unix.SYS_FCHMODAT, 2, -1}, {unix.SYS_FCHMODAT2, 2, -1},
}, legacyModeCalls...)

// createFlags are open's flags under which its mode is used.
const createFlags = unix.O_CREAT | unix.O_TMPFILE&^unix.O_DIRECTORY

// nativeArch is the audit architecture of this build ("" elsewhere: no
// filter is made).
func nativeArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// bpf builds a classic BPF program whose jumps name labels; code resolves
// them (every jump goes forward, within 255 instructions).
type bpf struct {
	ins    []bpfIns
	labels map[string]int
}

type bpfIns struct {
	code   uint16
	jt, jf string // labels; "" is the next instruction
	k      uint32
}

func (b *bpf) op(code uint16, k uint32) { b.ins = append(b.ins, bpfIns{code: code, k: k}) }
func (b *bpf) jump(code uint16, k uint32, jt, jf string) {
	b.ins = append(b.ins, bpfIns{code, jt, jf, k})
}
func (b *bpf) label(name string) { b.labels[name] = len(b.ins) }

// code is the program as bubblewrap reads it: (code, jt, jf, k) in the
// host's byte order.
func (b *bpf) code() []byte {
	rel := func(i int, l string) uint8 {
		if l == "" {
			return 0
		}
		d, ok := b.labels[l]
		if d -= i + 1; !ok || d < 0 || d > 255 {
			panic("sandbox: seccomp jump to " + l + " out of reach")
		}
		return uint8(d)
	}
	out := make([]byte, 0, 8*len(b.ins))
	for i, p := range b.ins {
		out = binary.NativeEndian.AppendUint16(out, p.code)
		out = append(out, rel(i, p.jt), rel(i, p.jf))
		out = binary.NativeEndian.AppendUint32(out, p.k)
	}
	return out
}

// argLow is the offset of a call's argument i in seccomp_data: its low 32
// bits on these little-endian architectures.
func argLow(i int) uint32 { return 16 + 8*uint32(i) }

// filterProgram is the filter, built once: every bubblewrap step and
// every zygote loads the same bytes.
var filterProgram = sync.OnceValue(buildFilter)

// buildFilter makes the filter: the architecture, x32's numbers, clone3
// and openat2, clone's namespace flags, the calls that set a mode, the
// denied list.
func buildFilter() []byte {
	arch, ok := nativeArch()
	if !ok {
		return nil
	}
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	b := &bpf{labels: map[string]int{}}
	b.op(ldW, 4)
	b.jump(jeq, arch, "", "enosys")
	b.op(ldW, 0)
	b.jump(jge, 0x40000000, "enosys", "") // x32's numbers
	b.jump(jeq, unix.SYS_CLONE3, "enosys", "")
	b.jump(jeq, unix.SYS_OPENAT2, "enosys", "")
	b.jump(jeq, unix.SYS_CLONE, "clone", "")
	for i, c := range modeCalls {
		b.jump(jeq, c.nr, fmt.Sprint("mode", i), "")
	}
	for _, nr := range denied {
		b.jump(jeq, nr, "eperm", "")
	}
	b.op(ret, unix.SECCOMP_RET_ALLOW)
	b.label("clone")
	b.op(ldW, argLow(0))
	b.jump(jset, cloneNamespaces, "eperm", "allow")
	for i, c := range modeCalls {
		b.label(fmt.Sprint("mode", i))
		if c.flags >= 0 {
			b.op(ldW, argLow(c.flags))
			b.jump(jset, createFlags, "", "allow")
		}
		b.op(ldW, argLow(c.mode))
		b.jump(jset, setID, "eperm", "allow")
	}
	b.label("allow")
	b.op(ret, unix.SECCOMP_RET_ALLOW)
	b.label("eperm")
	b.op(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	b.label("enosys")
	b.op(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	return b.code()
}

// filterFile is a pipe bubblewrap reads the filter from (--seccomp FD);
// nil where no filter is made.
func filterFile() (*os.File, error) {
	prog := filterProgram()
	if prog == nil {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if _, err := w.Write(prog); err != nil { // a few hundred bytes: within a pipe's buffer
		r.Close()
		return nil, err
	}
	return r, nil
}
