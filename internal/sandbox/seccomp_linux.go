package sandbox

import (
	"encoding/binary"
	"os"
	"runtime"

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

// filterProgram is the filter as bubblewrap reads it: classic BPF
// instructions (code, jt, jf, k) in the host's byte order.
func filterProgram() []byte {
	arch, ok := nativeArch()
	if !ok {
		return nil
	}
	const (
		ldW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosy = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	type ins struct {
		code   uint16
		jt, jf uint8
		k      uint32
	}
	n := len(denied)
	// Layout: the arch check, the x32 check, clone3, clone, the denied
	// list, then the returns: allow, EPERM, ENOSYS.
	prog := []ins{
		{ldW, 0, 0, 4}, // arch
		{jeq, 1, 0, arch},
		{ret, 0, 0, enosy},
		{ldW, 0, 0, 0}, // nr
		{jge, 0, 1, 0x40000000},
		{ret, 0, 0, enosy}, // x32's numbers
		{jeq, 0, 1, unix.SYS_CLONE3},
		{ret, 0, 0, enosy},
		{jeq, 0, 3, unix.SYS_CLONE},
		{ldW, 0, 0, 16},                          // args[0], its low 32 bits
		{jset, 0, uint8(n + 1), cloneNamespaces}, // without them: to the allow after the list
		{ret, 0, 0, eperm},
	}
	for i, nr := range denied {
		// A match jumps to the EPERM return after the list and the
		// allow: n-i-1 comparisons and the allow later.
		prog = append(prog, ins{jeq, uint8(n - i), 0, nr})
	}
	prog = append(prog, ins{ret, 0, 0, allow}, ins{ret, 0, 0, eperm})
	out := make([]byte, 0, 8*len(prog))
	for _, p := range prog {
		out = binary.NativeEndian.AppendUint16(out, p.code)
		out = append(out, p.jt, p.jf)
		out = binary.NativeEndian.AppendUint32(out, p.k)
	}
	return out
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
