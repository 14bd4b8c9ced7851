package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// initArg, as the first argument, makes this executable a server's init
// inside its sandbox. It is entered before main, in the package's init,
// so every binary that links the package (worker, CLI) serves as one:
// nothing else of the program runs in it.
const initArg = "--capflow-sandbox-init"

func init() {
	if len(os.Args) > 1 && os.Args[1] == initArg {
		os.Exit(initMain(os.Args[2:]))
	}
}

// envKeep is the prefix under which a tree's loader variables (LD_*,
// GLIBC_TUNABLES) reach capflow's init: its own dynamic loader must not
// read them (a library they preload runs in the init before it hides its
// control socket, found attacking issue 57); the init hands them to the
// tool as they were.
const envKeep = "CAPFLOW_INIT_KEEP_"

// envIn is the environment req's sandbox starts its command with: the
// tool's, but under capflow's init (commandIn) its loader variables kept
// under envKeep.
func envIn(req Request) []string {
	if !underInit(req) {
		return req.Env
	}
	out := make([]string, len(req.Env))
	for i, kv := range req.Env {
		if strings.HasPrefix(kv, "LD_") || strings.HasPrefix(kv, "GLIBC_TUNABLES=") {
			kv = envKeep + kv
		}
		out[i] = kv
	}
	return out
}

// toolEnv is the tool's environment, as envIn got it.
func toolEnv(env []string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		out[i] = strings.TrimPrefix(kv, envKeep)
	}
	return out
}

type rlimit struct {
	Resource int
	Cur, Max uint64
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// stepArg makes the init end with its command, as a step's tree does (a
// server's init stays while anything of its tree runs).
const stepArg = "--step"

// initMain runs a server's command inside its sandbox and lives as long
// as any process of its tree does: a server that daemonizes (forks and
// lets its first process exit) is adopted here rather than killed with
// the sandbox. SIGTERM and friends are caught, so a stop reaches the
// server while this init stays to reap it; exits with the command's
// status. With ctlArg it first opens the tree's way to the network
// (netInit); with stepArg it ends when its command does.
func initMain(argv []string) int {
	keepInheritedOut() // the tool gets its stdio alone, whatever bubblewrap left open
	env, step, ctl := toolEnv(os.Environ()), false, -1
	var mirror []uint16
	for len(argv) > 0 && strings.HasPrefix(argv[0], "--") {
		switch a := argv[0]; {
		case a == stepArg:
			step = true
		case strings.HasPrefix(a, ctlArg):
			ctl, _ = strconv.Atoi(strings.TrimPrefix(a, ctlArg))
		case strings.HasPrefix(a, mirrorArg):
			mirror = parsePorts(strings.TrimPrefix(a, mirrorArg))
		}
		argv = argv[1:]
	}
	if ctl >= 0 {
		// Not dumpable: the tool, the same user in the same namespaces,
		// can neither trace this init nor take its descriptors (its
		// control socket, through pidfd_getfd or /proc/PID/fd).
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
		var err error
		if env, err = netInit(ctl, env, mirror); err != nil {
			fmt.Fprintf(os.Stderr, "capflow sandbox init: %v\n", err)
			return 126
		}
	}
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "capflow sandbox init: no command")
		return 126
	}
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	signal.Notify(make(chan os.Signal, 8), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	path, err := exec.LookPath(argv[0])
	var p *os.Process
	if err == nil {
		p, err = os.StartProcess(path, argv, &os.ProcAttr{Env: env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "capflow sandbox init: %v\n", err)
		return 127
	}
	status := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return status // ECHILD: the whole tree is gone
		}
		if pid == p.Pid {
			status = ws.ExitStatus()
			if ws.Signaled() {
				status = 128 + int(ws.Signal())
			}
			if step {
				return status
			}
		}
	}
}
