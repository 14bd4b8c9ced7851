// The zygote's two halves (zygote_linux.c: the step's mounts;
// zygote_main_linux.c: the requests, the step's init and its tool).
#ifndef CAPFLOW_ZYGOTE_H
#define CAPFLOW_ZYGOTE_H

#include <sys/types.h>

#define ZMSG (256 * 1024) // a request's largest size (zygoteMax in zygote_linux.go)
#define ZFDS 64           // its largest number of descriptors
#define ZOPS 512          // of mount operations
// STEP_ID is a root worker's steps' user and group: an id nothing else on
// a host uses (not nobody's 65534, which daemons and other users' squashed
// files share: any process of the step's uid may read its /proc and
// ptrace it), past the ranges systemd gives users and containers.
#define STEP_ID 2080374784 // 0x7C000000
// CTL_FD is where a step with the network finds its init's control
// socket (--ctl), as under bubblewrap (ctlFD in netinit_linux.go).
#define CTL_FD 5
// EXE_FD holds capflow's init, opened by the zygote, until it starts.
#define EXE_FD 6

// op is one mount of the step's, in bubblewrap's words
// (Support.mountArgs): --tmpfs D, --ro-bind[-try] S D, --bind S D,
// --bind-fd N D; a root worker's step's own binds end in -own
// (--ro-bind-try-own, --bind-own, --bind-fd-own: zygote_ids_linux.c), and
// what the step names (its inputs, its manifest's read:) in -named
// (--ro-bind-try-named: found by the step user's own rights).
struct op {
	const char *kind, *src, *dst;
	int tree;  // the source, cloned before anything is covered (-1: none)
	int own;   // the run's own (a root worker's step: bound as the step's, --*-own)
	int named; // named by the step (a root worker's: found as the step user, --ro-bind-try-named)
	int idmap; // a user namespace that shows the source's owner as STEP_ID (-1: none)
	uid_t owner;
	gid_t group; // the source's, when idmap was made for it
};

extern char zerr[512];
int fail(const char *fmt, ...);
int setattr(int fd, const char *path, int flags, unsigned long long set, unsigned long long clr);
int clone_tree(int dirfd, const char *path, int flags);
int fd_index(const char *word, int nfds);
int clone_sources(struct op *ops, int n, int *fds, int nfds, int step_user);
int apply(struct op *ops, int n, int own);
int system_mounts(void);
int loopback_up(void);
int drop_bounding(void);
int drop_caps(int step_user);
int write_file(const char *path, const char *s);
int idmaps_ready(void);
void idmap_ops(struct op *ops, int n, int *fds, int nfds);
int idmap_tree(struct op *o);
int own_stdio(int *fds);
void idmaps_close(void);
int own_user(uid_t u, gid_t g);
int fresh_view(void);

#endif
