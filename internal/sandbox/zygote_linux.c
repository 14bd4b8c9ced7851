//go:build linux && cgo

// The zygote (docs/sandbox.md#the-zygote): a small process per cgroup set
// that forks each confined step into fresh namespaces. It runs before Go's
// runtime starts (a constructor), single-threaded, so it may fork without
// exec: a step costs one clone and one fork where bubblewrap costs three
// processes. zygote_linux.go is its other half.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zygote_linux.h"

char zerr[512]; // why the step's setup failed

// fail notes why setup failed (the first reason only) and returns -1.
int fail(const char *fmt, ...) {
	if (zerr[0] == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(zerr, sizeof zerr, fmt, ap);
		va_end(ap);
		size_t n = strlen(zerr);
		snprintf(zerr + n, sizeof zerr - n, ": %s", strerror(errno));
	}
	return -1;
}

int setattr(int fd, const char *path, int flags, unsigned long long set, unsigned long long clr) {
	struct mount_attr a = {.attr_set = set, .attr_clr = clr};
	return syscall(SYS_mount_setattr, fd, path, flags, &a, sizeof a);
}

int clone_tree(int dirfd, const char *path, int flags) {
	return syscall(SYS_open_tree, dirfd, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | flags);
}

// place makes dst's mount point on a tmpfs of the step's where it is
// missing: a folder, or an empty file for a file, with the folders above
// it. What exists is never opened (a FIFO would block the step's init).
static int placing_own; // apply's own: the folders place makes are the step user's

static void place(const char *dst, int dir) {
	char p[4096];
	snprintf(p, sizeof p, "%s", dst);
	for (char *s = p + 1; *s; s++) {
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, 0755) == 0 && placing_own)
				(void)!chown(p, STEP_ID, STEP_ID); // on the step's tmpfs: a home's .cache it may write
			*s = '/';
		}
	}
	if (dir) {
		mkdir(p, 0755);
	} else {
		int fd = open(p, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
	}
}

// attach mounts the detached tree t on dst: read-only with all beneath
// it, or writable at its top alone (a read-only mount inside a write
// folder stays read-only, as under bubblewrap).
static int attach(int t, const char *dst, int ro) {
	struct stat st;
	fstat(t, &st);
	place(dst, S_ISDIR(st.st_mode));
	if (syscall(SYS_move_mount, t, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) != 0)
		return fail("bind %s", dst);
	unsigned long long nos = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	if (setattr(AT_FDCWD, dst, AT_RECURSIVE, ro ? nos | MOUNT_ATTR_RDONLY : nos, 0) != 0 ||
	    (!ro && setattr(AT_FDCWD, dst, 0, 0, MOUNT_ATTR_RDONLY) != 0))
		return fail("flags of %s", dst);
	return 0;
}

// fd_index reads word as the index of one of the nfds descriptors sent
// with a request, past stdio: digits only; -1 otherwise.
int fd_index(const char *word, int nfds) {
	char *end;
	errno = 0;
	long k = strtol(word, &end, 10);
	if (*word == 0 || *end != 0 || errno != 0 || k < 3 || k >= nfds)
		return -1;
	return (int)k;
}

// clone_as_user clones src by the step user's own rights (its file-system
// ids, no groups) and never through a /proc link: what a root worker's
// step names is bound only where that user could reach it on the machine.
// Its folders above are laid anew on the step's tmpfs, theirs, so a file
// any user could read behind a folder only root may enter (0700: /root,
// one in /tmp) was the step's to read; and a link to /proc/self/cwd led
// to the zygote's own folder (found attacking). exact: src is a path
// read from a handle, followed through no link at all. The init's groups
// go for good: it becomes the step user, who has none (drop_caps).
static int clone_as_user(const char *src, int exact) {
	if (setgroups(0, NULL) != 0)
		return -1;
	setfsgid(STEP_ID);
	setfsuid(STEP_ID);
	int fd = -1;
	struct open_how how = {.flags = O_PATH | O_CLOEXEC | (exact ? O_NOFOLLOW : 0),
			       .resolve = RESOLVE_NO_MAGICLINKS | (exact ? RESOLVE_NO_SYMLINKS : 0)};
	if (setfsuid(-1) == STEP_ID && setfsgid(-1) == STEP_ID) // -1 changes nothing: it says what is
		fd = syscall(SYS_openat2, AT_FDCWD, src, &how, sizeof how);
	else
		errno = EPERM;
	int e = errno;
	setfsuid(0);
	setfsgid(0);
	int t = fd >= 0 ? clone_tree(fd, "", AT_EMPTY_PATH | AT_RECURSIVE) : -1;
	if (fd >= 0) {
		e = errno;
		close(fd);
	}
	errno = e;
	return t;
}

// clone_handed clones the source of a bind handed over by descriptor fd
// (--bind-fd, --ro-bind-fd): found by its path, it must be the very file
// or folder of the descriptor. A named one (a root worker's step) is
// found by the step user's rights, and is not bound where it cannot be.
static int clone_handed(struct op *o, int fd, int step_user) {
	char link[64], path[4096];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t m = readlink(link, path, sizeof path - 1);
	if (m <= 0)
		return fail("the source of %s", o->dst);
	path[m] = 0;
	int named = o->named && step_user;
	o->tree = named ? clone_as_user(path, 1) : clone_tree(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_RECURSIVE); // with what is mounted in it
	struct stat a, b;
	if (named && o->tree < 0)
		return 0; // out of the step user's reach: not bound
	if (o->tree < 0 || fstat(o->tree, &a) != 0 || fstat(fd, &b) != 0)
		return fail("the source %s", path);
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return errno = EXDEV, fail("%s is not what was handed over", path);
	return 0;
}

// clone_sources clones every bind's source while the file system is
// still the machine's: a tmpfs laid over a hidden root must not hide
// what is bound back from it.
int clone_sources(struct op *ops, int n, int *fds, int nfds, int step_user) {
	for (int i = 0; i < n; i++) {
		struct op *o = &ops[i];
		o->tree = -1;
		if (strcmp(o->kind, "--tmpfs") == 0)
			continue;
		if (strcmp(o->kind, "--bind-fd") == 0 || strcmp(o->kind, "--ro-bind-fd") == 0) {
			int k = fd_index(o->src, nfds);
			if (k < 0)
				return errno = EBADF, fail("%s %s", o->kind, o->src);
			if (clone_handed(o, fds[k], step_user) != 0)
				return -1;
			continue;
		}
		if (o->named && step_user) {
			o->tree = clone_as_user(o->src, 0); // out of the step user's reach, it is not bound
			continue;
		}
		o->tree = clone_tree(AT_FDCWD, o->src, AT_RECURSIVE);
		if (o->tree < 0 && !(strcmp(o->kind, "--ro-bind-try") == 0 && errno == ENOENT))
			return fail("bind %s", o->src);
	}
	for (int i = 0; i < n; i++)
		if (idmap_tree(&ops[i]) != 0)
			return -1;
	return 0;
}

// apply makes the mounts in order; own: the tmpfs are the step's user's
// (a root worker's steps are STEP_ID: their own /tmp, and the emptied
// homes they may write as they could before).
int apply(struct op *ops, int n, int own) {
	char opts[64] = "mode=0755";
	if (own)
		snprintf(opts, sizeof opts, "mode=0755,uid=%u,gid=%u", STEP_ID, STEP_ID);
	placing_own = own;
	for (int i = 0; i < n; i++) {
		struct op *o = &ops[i];
		if (strcmp(o->kind, "--tmpfs") == 0) {
			place(o->dst, 1);
			if (mount("tmpfs", o->dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
				return fail("tmpfs %s", o->dst);
		} else if (o->tree >= 0 && attach(o->tree, o->dst, strncmp(o->kind, "--ro-", 5) == 0) != 0) {
			return -1;
		}
	}
	return 0;
}

// system_mounts are the step's own /proc (its PID namespace; the kernel's
// settings read-only, as bubblewrap covers them: a root worker's tool
// under bubblewrap is uid 0, which the kernel lets write them, and the
// zygote's keeps them read-only for its step user too; also where some hosts have
// root-writable files that check no capability, as container runtimes
// mask them: /proc/acpi/wakeup, /proc/scsi/scsi), /dev/pts, /dev/shm.
int system_mounts(void) {
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return fail("mount /proc");
	const char *ro[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/acpi", "/proc/scsi", "/proc/asound"};
	for (size_t i = 0; i < sizeof ro / sizeof ro[0]; i++) {
		int t = clone_tree(AT_FDCWD, ro[i], 0);
		if (t >= 0 && (syscall(SYS_move_mount, t, "", AT_FDCWD, ro[i], MOVE_MOUNT_F_EMPTY_PATH) != 0 ||
			       setattr(AT_FDCWD, ro[i], 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0) != 0))
			return fail("%s read-only", ro[i]);
		if (t >= 0)
			close(t);
	}
	if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620") != 0)
		return fail("mount /dev/pts");
	if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
		return fail("mount /dev/shm");
	return 0;
}

// loopback_up brings up the step's own loopback (bubblewrap's does too).
int loopback_up(void) {
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq r = {0};
	strcpy(r.ifr_name, "lo");
	int ok = s >= 0 && ioctl(s, SIOCGIFFLAGS, &r) == 0;
	r.ifr_flags |= IFF_UP | IFF_RUNNING;
	ok = ok && ioctl(s, SIOCSIFFLAGS, &r) == 0;
	if (s >= 0)
		close(s);
	return ok ? 0 : fail("loopback");
}

// drop_bounding empties the bounding set: what no exec can give back.
// Each drop is a new set of credentials (about a microsecond and a half),
// so a caller whose set is empty already (a root zygote's steps, below)
// only reads it.
int drop_bounding(void) {
	for (int c = 0, in; (in = prctl(PR_CAPBSET_READ, c, 0, 0, 0)) >= 0; c++)
		if (in == 1 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0)
			return fail("drop capability %d", c);
	return 0;
}

// drop_caps leaves the tree no capability, now or after an exec; with
// step_user (a root worker's), the tree is STEP_ID, no longer root: it
// reads and writes the machine as another user does.
int drop_caps(int step_user) {
	if (drop_bounding() != 0)
		return -1;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (step_user && (setgroups(0, NULL) != 0 || setresgid(STEP_ID, STEP_ID, STEP_ID) != 0 || setresuid(STEP_ID, STEP_ID, STEP_ID) != 0))
		return fail("the step's user");
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{0}};
	if (syscall(SYS_capset, &h, d) != 0)
		return fail("capset");
	return 0;
}

int write_file(const char *path, const char *s) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int ok = fd >= 0 && write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

// own_user maps a step's user namespace to the worker's user alone.
int own_user(uid_t u, gid_t g) {
	char m[64];
	write_file("/proc/self/setgroups", "deny");
	snprintf(m, sizeof m, "%u %u 1", u, u);
	if (write_file("/proc/self/uid_map", m) != 0)
		return fail("uid_map");
	snprintf(m, sizeof m, "%u %u 1", g, g);
	if (write_file("/proc/self/gid_map", m) != 0)
		return fail("gid_map");
	return 0;
}

static const char *devnodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

// fresh_view makes the step's copy of the machine's mounts, as they are
// now, its own (nothing mounted from now on reaches it) and read-only
// whole, no set-uid, no device files, but a read-only /dev of
// bubblewrap's kind: null, zero, full, random, urandom, tty and links
// (pts and shm are mounted with /proc, system_mounts).
int fresh_view(void) {
	char p[64];
	int t[6];
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return fail("private mounts");
	for (int i = 0; i < 6; i++) { // with the machine's flags, devices allowed
		snprintf(p, sizeof p, "/dev/%s", devnodes[i]);
		t[i] = clone_tree(AT_FDCWD, p, 0);
	}
	if (setattr(AT_FDCWD, "/", AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0) != 0)
		return fail("read-only root");
	if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID, "mode=0755") != 0)
		return fail("/dev");
	mkdir("/dev/pts", 0755);
	mkdir("/dev/shm", 01777);
	for (int i = 0; i < 6; i++) {
		snprintf(p, sizeof p, "/dev/%s", devnodes[i]);
		place(p, 0);
		// Read-only: a root worker's tool (uid 0) cannot chmod or touch the
		// machine's own nodes; reading and writing a device needs no
		// writable mount.
		if (t[i] >= 0 && (syscall(SYS_move_mount, t[i], "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH) != 0 ||
				  setattr(AT_FDCWD, p, 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0) != 0))
			return fail("%s", p);
		if (t[i] >= 0)
			close(t[i]);
	}
	const char *links[][2] = {{"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"},
				  {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"},
				  {"pts/ptmx", "/dev/ptmx"}, {"/proc/kcore", "/dev/core"}};
	for (int i = 0; i < 6; i++)
		if (symlink(links[i][0], links[i][1]) != 0)
			return fail("%s", links[i][1]);
	if (setattr(AT_FDCWD, "/dev", 0, MOUNT_ATTR_RDONLY, 0) != 0)
		return fail("read-only /dev");
	return 0;
}
