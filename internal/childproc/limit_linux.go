package childproc

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// capAddressSpace limits the process's address space to what it maps now
// plus extra. RLIMIT_AS, not RLIMIT_DATA: the kernels this runs on do not
// all enforce the latter for anonymous mappings.
func capAddressSpace(extra uint64) error {
	now, err := vmSize()
	if err != nil {
		return err
	}
	lim := now + extra
	// Under a lower hard limit already (the worker's own), keep that one:
	// raising it is not allowed.
	var cur syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &cur) == nil && cur.Max < lim {
		lim = cur.Max
	}
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: lim, Max: lim})
}

func vmSize() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if rest, ok := bytes.CutPrefix(s.Bytes(), []byte("VmSize:")); ok {
			kb, err := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}

func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// lowerPriority makes this process nice 10: background work to the
// worker it serves.
func lowerPriority() { _ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 10) }

// executable is this process's own binary as the kernel holds it: after an
// upgrade renamed a new binary over the old path (or removed it), the old
// worker's children would have run the new one, which speaks another
// request format (found attacking issue 57; moby's reexec.Self does the
// same).
func executable() (string, error) { return "/proc/self/exe", nil }
