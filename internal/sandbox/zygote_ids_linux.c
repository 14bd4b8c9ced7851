//go:build linux && cgo

// A root worker's steps run as STEP_ID, not as root (docs/sandbox.md): they
// read the machine as any other user does. What the run was given (the
// project, its tool, its folders) is bound in with its owner seen as
// STEP_ID (an idmapped mount), so the step reads and writes there as it
// did, and what it writes belongs on disk to the folder's owner.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zygote_linux.h"

// maps are the zygote's user namespaces, one per owner of what steps are
// given (a project's folders have one or two), made once.
static struct {
	uid_t u;
	gid_t g;
	int fd;
} maps[16];
static int nmaps;

// new_map makes a user namespace in which the machine's u:g is STEP_ID: a
// child enters a new one, the zygote (root) writes its maps and keeps a
// handle on it. -1 when it cannot.
static int new_map(uid_t u, gid_t g) {
	int ready[2], done[2], fd = -1;
	if (pipe2(ready, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(done, O_CLOEXEC) != 0) {
		close(ready[0]), close(ready[1]);
		return -1;
	}
	pid_t c = fork();
	if (c == 0) {
		close(ready[0]), close(done[1]); // done ends when the zygote closes its end
		char ok = unshare(CLONE_NEWUSER) == 0;
		(void)!write(ready[1], &ok, 1);
		(void)!read(done[0], &ok, 1);
		_exit(0);
	}
	close(ready[1]), close(done[0]);
	char ok = 0, path[64], m[64];
	if (c > 0 && read(ready[0], &ok, 1) == 1 && ok) {
		snprintf(path, sizeof path, "/proc/%d/uid_map", c);
		snprintf(m, sizeof m, "%u %u 1", u, STEP_ID);
		int mapped = write_file(path, m) == 0;
		snprintf(path, sizeof path, "/proc/%d/gid_map", c);
		snprintf(m, sizeof m, "%u %u 1", g, STEP_ID);
		mapped = mapped && write_file(path, m) == 0;
		snprintf(path, sizeof path, "/proc/%d/ns/user", c);
		if (mapped)
			fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	close(done[1]), close(ready[0]);
	if (c > 0)
		waitpid(c, NULL, 0);
	return fd;
}

// idmap_of is the user namespace that shows u:g as STEP_ID (-1: none).
static int idmap_of(uid_t u, gid_t g) {
	for (int i = 0; i < nmaps; i++)
		if (maps[i].u == u && maps[i].g == g)
			return maps[i].fd;
	if (nmaps == (int)(sizeof maps / sizeof maps[0]))
		return -1;
	int fd = new_map(u, g);
	if (fd >= 0)
		maps[nmaps].u = u, maps[nmaps].g = g, maps[nmaps++].fd = fd;
	return fd;
}

// idmaps_ready says whether this zygote can give its steps what they are
// given as their own: a root worker's steps run as STEP_ID only then.
int idmaps_ready(void) { return idmap_of(0, 0) >= 0; }

// idmap_ops finds, in the zygote, the user namespace for each bind of
// what the run was given as its own, by its source's owner as it is now;
// anything else bound (a file an input names, a manifest's read:) the
// step reads as any user would.
void idmap_ops(struct op *ops, int n, int *fds, int nfds) {
	for (int i = 0; i < n; i++) {
		struct op *o = &ops[i];
		struct stat st;
		o->idmap = -1;
		if (!o->own)
			continue;
		int k = strcmp(o->kind, "--bind-fd") == 0 ? fd_index(o->src, nfds) : -2;
		if (k == -1 || (k >= 0 ? fstat(fds[k], &st) : stat(o->src, &st)) != 0)
			continue;
		o->owner = st.st_uid;
		o->group = st.st_gid;
		o->idmap = idmap_of(st.st_uid, st.st_gid);
	}
}

// idmap_tree shows a cloned source's owner as the step's user, when the
// clone is still owned as it was (a swap between the two looks gets no
// map), with what is mounted inside it where those file systems can, else
// at its top alone. A read bind whose file system cannot (a remote
// folder) is seen as any other user would see it; a write folder's
// refusal fails the step's setup, which then runs under bubblewrap, saying
// why, rather than find its own folder unwritable.
int idmap_tree(struct op *o) {
	struct stat st;
	if (o->tree < 0 || o->idmap < 0 || fstat(o->tree, &st) != 0 || st.st_uid != o->owner || st.st_gid != o->group)
		return 0;
	struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = o->idmap};
	if (syscall(SYS_mount_setattr, o->tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) == 0 ||
	    syscall(SYS_mount_setattr, o->tree, "", AT_EMPTY_PATH, &a, sizeof a) == 0 || strncmp(o->kind, "--ro-", 5) == 0)
		return 0;
	return fail("the step user's write folder %s (an idmapped mount)", o->dst);
}

// own_stdio gives the step user the tool's stdio where they are pipes the
// worker made (a tool reopens /dev/stdout, /dev/stderr): a pipe's inode is
// in no file system of the machine's.
int own_stdio(int *fds) {
	for (int i = 0; i < 3; i++) {
		struct stat st;
		if (fstat(fds[i], &st) == 0 && S_ISFIFO(st.st_mode) && fchown(fds[i], STEP_ID, STEP_ID) != 0)
			return fail("the tool's stdio");
	}
	return 0;
}

// idmaps_close closes, in a step's init, the handles it inherited.
void idmaps_close(void) {
	for (int i = 0; i < nmaps; i++)
		close(maps[i].fd);
}
