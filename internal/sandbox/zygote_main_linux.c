//go:build linux && cgo

// The zygote's loop: each request, the step's init and its tool
// (zygote_linux.go sends them).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/nsfs.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zygote_linux.h"

extern char **environ;

static struct sock_fprog zfilter; // the seccomp filter, read once
static int zworker = -1;          // a pidfd of the worker, the zygote's parent and its steps'
static uid_t zuid;
static gid_t zgid;  // the worker's, which a step's user namespace maps
static int zstep;   // a root worker's steps run as STEP_ID (zygote_ids_linux.c)

struct req {
	struct op ops[ZOPS];
	int nops;
	const char *dir;
	struct rlimit lim[8];
	int res[8], nlim;
	char *env[4096];
	char **argv;
	int *fds, nfds, sync;
	int zygote[2]; // the zygote's ends (the worker's socket, sync's other end): its init closes its copies
	int netns; // the index in fds of a network namespace made for the step (-1: its clone makes one)
	int ctl;   // the index in fds of the control socket its init gets at CTL_FD (-1: none)
	int exe;   // capflow's init (a step with the network), opened by the zygote (-1: none)
};

// parse reads a request: NUL-ended words, mounts first (mountArgs), then
// --chdir D, --netns N, --ctl N, --rlimit R CUR MAX, --env K=V, and after
// "--" the command.
static int parse(char *msg, size_t len, struct req *r) {
	static char *w[ZMSG + 1]; // a word is at least its NUL: never cut
	int n = 0, nenv = 0;
	if (len == 0 || msg[len - 1] != 0) // its last word would run on into an earlier request's
		return errno = EINVAL, fail("a word without its NUL");
	for (size_t i = 0; i < len; n++) {
		w[n] = msg + i;
		i += strnlen(msg + i, len - i) + 1;
	}
	w[n] = NULL;
	for (int i = 0; i < n; i++) {
		const char *k = w[i];
		// A bind of what the run was given as its own, for a root
		// worker's step (zygote_ids_linux.c): the bind, marked.
		int own = 0, named = 0;
		for (const char **b = (const char *[]){"--ro-bind-try", "--bind", "--bind-fd", NULL}; *b; b++) {
			size_t m = strlen(*b);
			if (strncmp(k, *b, m) == 0 && strcmp(k + m, "-own") == 0)
				k = *b, own = 1;
		}
		// What the step names, for a root worker's step (clone_sources).
		if (strcmp(k, "--ro-bind-try-named") == 0)
			k = "--ro-bind-try", named = 1;
		else if (strcmp(k, "--ro-bind-fd-named") == 0)
			k = "--ro-bind-fd", named = 1;
		int two = strcmp(k, "--tmpfs") != 0 && strcmp(k, "--chdir") != 0 && strcmp(k, "--env") != 0 && strcmp(k, "--netns") != 0 &&
			  strcmp(k, "--ctl") != 0;
		if (strcmp(k, "--") == 0) {
			r->argv = &w[i + 1];
			r->env[nenv] = NULL;
			return i + 1 < n ? 0 : (errno = EINVAL, fail("no command"));
		}
		int need = strcmp(k, "--rlimit") == 0 ? 3 : 1 + two;
		if (i + need >= n)
			return errno = EINVAL, fail("%s needs its arguments", k);
		if (strcmp(k, "--chdir") == 0) {
			r->dir = w[++i];
		} else if (strcmp(k, "--netns") == 0) {
			// Never stdio, never past what was sent, only as root (a user's
			// step is in a user namespace of its own, which may not enter it).
			r->netns = fd_index(w[++i], r->nfds);
			if (r->netns < 0 || zuid != 0)
				return errno = EINVAL, fail("--netns %s", w[i]);
		} else if (strcmp(k, "--ctl") == 0) {
			// A step with the network: its init (capflow's, the command)
			// talks to the worker through it.
			if ((r->ctl = fd_index(w[++i], r->nfds)) < 0)
				return errno = EINVAL, fail("--ctl %s", w[i]);
		} else if (strcmp(k, "--env") == 0) {
			if (nenv == 4095)
				return errno = E2BIG, fail("environment");
			r->env[nenv++] = w[++i];
		} else if (strcmp(k, "--rlimit") == 0) {
			if (r->nlim == 8)
				return errno = E2BIG, fail("rlimits");
			r->res[r->nlim] = atoi(w[i + 1]);
			r->lim[r->nlim].rlim_cur = strtoull(w[i + 2], NULL, 10);
			r->lim[r->nlim++].rlim_max = strtoull(w[i + 3], NULL, 10);
			i += 3;
		} else if (strcmp(k, "--tmpfs") != 0 && strcmp(k, "--ro-bind") != 0 && strcmp(k, "--ro-bind-try") != 0 &&
			   strcmp(k, "--bind") != 0 && strcmp(k, "--bind-fd") != 0 && strcmp(k, "--ro-bind-fd") != 0) {
			return errno = EINVAL, fail("%s is not a mount the zygote makes", k);
		} else if (r->nops < ZOPS) {
			struct op *o = &r->ops[r->nops++];
			o->kind = k;
			o->src = two ? w[++i] : NULL;
			o->dst = w[++i];
			o->idmap = -1;
			o->own = own;
			o->named = named;
		} else {
			return errno = E2BIG, fail("mounts");
		}
	}
	return errno = EINVAL, fail("no command");
}

// tool runs the step's command: its own session, stdio, rlimits, no
// descriptor of capflow's but its control socket at CTL_FD (a step with
// the network), no new privileges, the seccomp filter. It runs in the
// init's memory until its exec (start_tool): it changes only what is its
// own (descriptors, signal handlers, mask, session, limits) and the
// environ pointer, which the init no longer reads.
static int tool(void *arg) {
	struct req *r = arg;
	setsid();
	for (int i = 0; i < r->nlim; i++)
		setrlimit(r->res[i], &r->lim[i]);
	// Out of stdio's way first; the init's own descriptor closes as it
	// starts (close-on-exec).
	int ctl = r->ctl >= 0 ? fcntl(r->fds[r->ctl], F_DUPFD, EXE_FD + 1) : -1;
	int exe = r->exe >= 0 ? fcntl(r->exe, F_DUPFD, EXE_FD + 1) : -1;
	if ((r->ctl >= 0 && ctl < 0) || (r->exe >= 0 && exe < 0))
		_exit(126);
	for (int i = 0; i < 3; i++)
		if (dup2(r->fds[i], i) < 0)
			_exit(126);
	if ((ctl >= 0 && dup2(ctl, CTL_FD) < 0) || (exe >= 0 && (dup2(exe, EXE_FD) < 0 || fcntl(EXE_FD, F_SETFD, FD_CLOEXEC) < 0)))
		_exit(126);
	syscall(SYS_close_range, 3, ctl >= 0 ? CTL_FD - 1 : ~0U, 0);
	if (ctl >= 0)
		syscall(SYS_close_range, exe >= 0 ? EXE_FD + 1 : CTL_FD + 1, ~0U, 0);
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (zfilter.len > 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &zfilter) != 0) {
		dprintf(2, "capflow sandbox: seccomp: %s\n", strerror(errno));
		_exit(126);
	}
	environ = r->env;
	if (exe >= 0) // by the descriptor: no folder on its path need be the step user's
		syscall(SYS_execveat, EXE_FD, "", r->argv, environ, AT_EMPTY_PATH);
	else
		execvp(r->argv[0], r->argv);
	dprintf(2, "capflow sandbox: exec %s: %s\n", r->argv[0], strerror(errno));
	_exit(127);
}

// start_tool starts the tool as posix_spawn does: in the init's memory,
// the init stopped until the tool's exec, so no copy of the init's memory
// is made, faulted in and thrown away by the exec. The tool runs on a
// stack of its own, mapped for this start below a guard page and sized
// as posix_spawn sizes it: execvp's search, and the argument list it
// makes for a script without "#!" (argc + 2 pointers), which a fixed
// stack would let a long command line run past (found attacking).
static pid_t start_tool(struct req *r) {
	size_t argc = 0, page = (size_t)sysconf(_SC_PAGESIZE);
	while (r->argv[argc])
		argc++;
	size_t size = ((argc + 2) * sizeof(char *) + (64 << 10) + page - 1) / page * page;
	char *m = mmap(NULL, page + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	pid_t t = -1;
	if (mprotect(m, page, PROT_NONE) == 0)
		t = clone(tool, m + page + size, CLONE_VM | CLONE_VFORK | SIGCHLD, r);
	int e = errno;
	munmap(m, page + size); // the tool has exec'd or ended (CLONE_VFORK)
	errno = e;
	return t;
}

// worker_gone reports whether the worker has exited. A step's init
// checks it once its parent-death signal is armed, which a new user
// clears: armed after the worker ended, it never comes. (getppid says
// nothing here: the worker is outside the init's PID namespace, 0.)
static int worker_gone(void) {
	return zworker >= 0 && poll(&(struct pollfd){.fd = zworker, .events = POLLIN}, 1, 0) == 1;
}

// enter_net enters the network namespace made for the step: only a
// network namespace (not a pidfd, which setns takes too), and never the
// zygote's own, the worker's.
static int enter_net(int fd) {
	struct stat ns, own;
	if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET)
		return errno = EINVAL, fail("entering its network namespace (not one)");
	if (fstat(fd, &ns) != 0 || stat("/proc/self/ns/net", &own) != 0)
		return fail("entering its network namespace");
	if (ns.st_dev == own.st_dev && ns.st_ino == own.st_ino)
		return errno = EINVAL, fail("entering its network namespace (the worker's own)");
	return setns(fd, CLONE_NEWNET) == 0 ? 0 : fail("entering its network namespace");
}

// setup lays out the step's namespaces and file system, in order; the
// first failure says why (zerr).
static int setup(struct req *r) {
	if (r->netns >= 0 && enter_net(r->fds[r->netns]) != 0)
		return -1;
	if (zuid != 0 && own_user(zuid, zgid) != 0)
		return -1;
	int cloned = fresh_view() == 0 && clone_sources(r->ops, r->nops, r->fds, r->nfds, zstep) == 0;
	idmaps_close();
	if (!cloned || system_mounts() != 0 || apply(r->ops, r->nops, zstep) != 0)
		return -1;
	if (r->dir && chdir(r->dir) != 0)
		return fail("chdir %s", r->dir);
	if (zstep && own_stdio(r->fds) != 0)
		return -1;
	if (loopback_up() != 0 || drop_caps(zstep) != 0)
		return -1;
	// capflow's init (a step with the network) must be this user's to run:
	// where it is not, the step fails at once, saying why.
	if (r->exe >= 0 && syscall(SYS_faccessat2, r->exe, "", X_OK, AT_EMPTY_PATH) != 0)
		return fail("capflow's init %s", r->argv[0]);
	// A new user clears the parent-death signal: armed again, so the
	// step still dies with the worker's forker thread.
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		return fail("the parent-death signal");
	// Armed too late if the worker ended since (a new user cleared it).
	return worker_gone() ? (errno = ESRCH, fail("the worker has ended")) : 0;
}

// send_fd sends len bytes of buf on sock, with fd when it is one: a
// step's init says it is set up and hands over its mount namespace, which
// the zygote passes on with its answer (the worker holds it until the
// step is put away).
static int send_fd(int sock, const char *buf, size_t len, int fd) {
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {(void *)buf, len};
	struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		h.msg_control = cbuf, h.msg_controllen = sizeof cbuf;
		struct cmsghdr *c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &h, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

// recv_fd reads the init's report into zerr: its reason for failing, or
// one byte and the handle it sent (*fd, -1 without one).
static ssize_t recv_fd(int sock, int *fd) {
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {zerr, sizeof zerr - 1};
	struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	*fd = -1;
	ssize_t n = recvmsg(sock, &h, MSG_CMSG_CLOEXEC);
	struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&h) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	return n;
}

// pass_on sends a signal the init got to every other process of its PID
// namespace.
static void pass_on(int sig) {
	int e = errno;
	kill(-1, sig);
	errno = e;
}

// step_init is the step's PID 1: it lays out the file system, reports
// the setup to the zygote, starts the tool and ends with it (its status,
// 128+signal when a signal ended it), taking the namespace with it.
static int step_init(void *arg) {
	struct req *r = arg;
	// Only the zygote holds its ends: a zygote that dies is seen to by the
	// worker (its socket's end) and by this init (sync's).
	close(r->zygote[0]);
	close(r->zygote[1]);
	prctl(PR_SET_PDEATHSIG, SIGKILL); // the worker's forker thread
	if (worker_gone()) // it ended before that
		_exit(126);
	if (setup(r) != 0) {
		(void)!write(r->sync, zerr, strlen(zerr));
		_exit(126);
	}
	prctl(PR_SET_DUMPABLE, 0);
	// Set up: the zygote answers before the tool starts (an exec that
	// blocks, on a hung remote file system say, is the step's to time out,
	// not a setup's), and the tool starts only once it has: its byte comes
	// after its answer (a zygote killed meanwhile would leave a step no
	// one knows of).
	char told;
	if (send_fd(r->sync, "", 1, open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) != 0 || read(r->sync, &told, 1) != 1)
		_exit(126);
	pid_t t = start_tool(r);
	if (t < 0) {
		dprintf(r->fds[2], "capflow sandbox: starting the tool: %s\n", strerror(errno));
		_exit(126);
	}
	syscall(SYS_close_range, 0, ~0U, 0);
	// Terminate's SIGTERM, sent to this init, reaches the tool and what it
	// started: the init of a PID namespace gets from outside only what it
	// handles, and a worker that is not root cannot list the namespace's
	// processes itself (this init is not dumpable).
	struct sigaction pass = {.sa_handler = pass_on, .sa_flags = SA_RESTART};
	sigemptyset(&pass.sa_mask);
	sigaction(SIGTERM, &pass, NULL);
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, 0);
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			_exit(126);
		if (p == t)
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
}

// step_flags are a step's namespaces: a user namespace of its own too
// unless the worker is root (bubblewrap's --unshare-user likewise).
static int step_flags(void) {
	int f = CLONE_PARENT | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
	return zuid != 0 ? f | CLONE_NEWUSER : f;
}

// open_init opens capflow's init for a step with the network while the
// zygote is root and sees the machine's folders: the step starts it by
// this descriptor (tool), whatever folders its path runs through (a
// root-only one, or one a step's read: binds as it is).
static int open_init(struct req *r) {
	if (r->ctl < 0)
		return 0;
	r->exe = open(r->argv[0], O_PATH | O_CLOEXEC);
	return r->exe >= 0 ? 0 : fail("capflow's init %s", r->argv[0]);
}

static char stack[1 << 18] __attribute__((aligned(16))); // the step init's (execvp's search included)

// spawn starts one step and answers "ok PID" or "err PID why" (PID 0:
// nothing was started), with the step's mount namespace. The step's init is the worker's child
// (CLONE_PARENT): the worker waits for it, born in this zygote's cgroups.
static void spawn(int sock, char *msg, size_t len, int *fds, int nfds, int cut) {
	static struct req r;
	memset(&r, 0, sizeof r);
	r.netns = -1;
	r.ctl = -1;
	r.exe = -1;
	zerr[0] = 0;
	char out[640];
	int sync[2] = {-1, -1}, mounts = -1;
	pid_t pid = 0;
	r.fds = fds;
	r.nfds = nfds;
	if (cut || nfds < 3) {
		errno = E2BIG, fail("the request was cut");
	} else if (parse(msg, len, &r) != 0 || open_init(&r) != 0) {
		// zerr says why
	} else if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) != 0) {
		fail("socketpair"); // never "ok" without a step (found attacking)
	} else {
		r.sync = sync[1];
		r.zygote[0] = sock, r.zygote[1] = sync[0];
		if (zstep)
			idmap_ops(r.ops, r.nops, fds, nfds);
		int flags = step_flags();
		if (r.netns >= 0)
			flags &= ~CLONE_NEWNET; // the step enters the one made for it (step_init)
		pid = clone(step_init, stack + sizeof stack, flags | CLONE_NEWCGROUP, &r);
		if (pid < 0 && errno == EINVAL)
			pid = clone(step_init, stack + sizeof stack, flags, &r);
		close(sync[1]);
		int named = 0; // first: whatever follows, the worker can end and reap it
		if (pid > 0) {
			snprintf(out, sizeof out, "pid %d", pid);
			named = send_fd(sock, out, strlen(out), -1) == 0;
		}
		if (pid < 0) {
			pid = 0;
			fail("clone");
		} else if (!named) { // a step the worker would not know of never starts (found attacking)
			kill(pid, SIGKILL);
			fail("naming the sandbox's init");
		} else if (poll(&(struct pollfd){.fd = sync[0], .events = POLLIN}, 1, 10000) != 1) {
			kill(pid, SIGKILL); // a setup that hangs is not waited for
			errno = ETIMEDOUT, fail("the sandbox's setup");
		} else {
			ssize_t n = recv_fd(sync[0], &mounts);
			zerr[n > 0 ? n : 0] = 0;
			if (n <= 0)
				snprintf(zerr, sizeof zerr, "the sandbox's init ended before the tool started");
		}
	}
	if (zerr[0] == 0)
		snprintf(out, sizeof out, "ok %d", pid);
	else
		snprintf(out, sizeof out, "err %d %s", pid, zerr);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (r.exe >= 0)
		close(r.exe);
	if (send_fd(sock, out, strlen(out), zerr[0] == 0 ? mounts : -1) != 0)
		_exit(1); // the worker, left without an answer, sees this end: it ends the init it was named
	// The worker has its answer: the init may start the tool (it waits
	// for this, and ends without it).
	if (zerr[0] == 0)
		(void)!send(sync[0], "", 1, MSG_NOSIGNAL);
	if (sync[0] >= 0)
		close(sync[0]);
	if (mounts >= 0)
		close(mounts);
}

static void serve(int sock) {
	static char msg[ZMSG];
	for (;;) {
		char cbuf[CMSG_SPACE(ZFDS * sizeof(int))];
		struct iovec iov = {msg, sizeof msg};
		struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
		ssize_t n = recvmsg(sock, &h, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); // the worker closed its end
		int fds[ZFDS], nfds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) && nfds < ZFDS; i++)
					memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		spawn(sock, msg, (size_t)n, fds, nfds, (h.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0);
	}
}

static int try_init(void *arg) {
	int *sync = arg;
	int bad = (zuid != 0 && own_user(zuid, zgid) != 0) || fresh_view() != 0 || system_mounts() != 0;
	if (bad)
		(void)!write(sync[1], zerr, strlen(zerr));
	_exit(bad);
}

// try_step lays out one step's namespaces and file system, running
// nothing: a machine that refuses them has no zygote (why: zerr).
static int try_step(void) {
	int sync[2];
	if (pipe2(sync, O_CLOEXEC) != 0)
		return fail("pipe");
	pid_t pid = clone(try_init, stack + sizeof stack, (step_flags() & ~CLONE_PARENT) | SIGCHLD, sync);
	close(sync[1]);
	int st;
	if (pid < 0) {
		close(sync[0]);
		return fail("namespaces");
	}
	ssize_t n = read(sync[0], zerr, sizeof zerr - 1);
	zerr[n > 0 ? n : 0] = 0;
	close(sync[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return zerr[0] ? -1 : (errno = EPERM, fail("a step's file system"));
	return 0;
}

// not_started tells the worker why this zygote serves nothing (zerr),
// and ends it.
static void not_started(void) {
	char out[600];
	snprintf(out, sizeof out, "err 0 %s", zerr);
	(void)!send(3, out, strlen(out), MSG_NOSIGNAL);
	_exit(1);
}

// read_filter reads the steps' seccomp filter from fd to its end (the
// worker wrote it whole and closed it). Empty: this architecture has none
// (zygoteFilter); anything but whole instructions, or more than the
// zygote takes, is never read as no filter, nor cut (found attacking).
static void read_filter(int fd) {
	static struct sock_filter prog[4096 + 1]; // one more: a longer filter is refused
	ssize_t n = 0, got = 1;
	while (n < (ssize_t)sizeof prog && got != 0) {
		got = read(fd, (char *)prog + n, sizeof prog - n);
		if (got < 0 && errno != EINTR) {
			n = -1;
			break;
		}
		n += got > 0 ? got : 0;
	}
	close(fd);
	if (n < 0 || n == (ssize_t)sizeof prog || n % sizeof prog[0] != 0) {
		snprintf(zerr, sizeof zerr, "the seccomp filter: %zd bytes read", n == (ssize_t)sizeof prog ? -1 : n);
		not_started();
	}
	zfilter.len = n / sizeof prog[0];
	zfilter.filter = n > 0 ? prog : NULL;
}

// capflow_zygote makes this executable a zygote when its first argument
// says so (Support.zygote starts it): before Go's runtime, which would
// start threads, nothing of the Go program runs. fd 3 is the worker's
// socket, fd 4 the seccomp filter (classic BPF, filterProgram).
__attribute__((constructor)) static void capflow_zygote(int argc, char **argv) {
	if (argc < 2 || strcmp(argv[1], "--capflow-zygote") != 0)
		return;
	read_filter(4);
	zuid = geteuid();
	zgid = getegid();
	zworker = syscall(SYS_pidfd_open, getppid(), 0); // close-on-exec
	zstep = zuid == 0 && idmaps_ready();
	// A root zygote never execs: its bounding set goes once, here, not in
	// each step (whose clone keeps it). A user's steps are in user
	// namespaces of their own, each with a full set again: they drop it.
	// Where it cannot (no CAP_SETPCAP: a container may run a worker so),
	// each step's drop_caps tries again and refuses its step: never a
	// zygote turned off, whose root steps bubblewrap would run as root.
	if (zuid == 0 && drop_bounding() != 0)
		zerr[0] = 0;
	if (try_step() != 0)
		not_started();
	const char *ready = zstep ? "ready step-user" : "ready";
	(void)!send(3, ready, strlen(ready), MSG_NOSIGNAL);
	serve(3);
}
