package sandbox

import "golang.org/x/sys/unix"

// legacyModeCalls are the older calls that set a mode, which amd64 keeps
// beside the *at ones (seccomp_linux.go).
var legacyModeCalls = []modeCall{
	{unix.SYS_OPEN, 2, 1}, {unix.SYS_CREAT, 1, -1}, {unix.SYS_MKNOD, 1, -1}, {unix.SYS_CHMOD, 1, -1},
}
