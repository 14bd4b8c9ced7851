package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
)

// The argv[0] names that make this executable a sandbox helper. They are
// entered before main, in the package's init, so every binary that links
// the package (worker, CLI) serves as its own helper: nothing else of the
// program runs in them.
const (
	helperName = "capflow-sandbox" // joins cgroups, sets rlimits, execs bubblewrap
	// initArg, as the first argument, makes it a server's init inside the
	// sandbox (bubblewrap sets argv[0] to the path it runs).
	initArg = "--capflow-sandbox-init"
)

func init() {
	switch {
	case filepath.Base(os.Args[0]) == helperName:
		os.Exit(helperMain(os.Args[1:]))
	case len(os.Args) > 1 && os.Args[1] == initArg:
		os.Exit(initMain(os.Args[2:]))
	}
}

type rlimit struct {
	Resource int    `json:"r"`
	Cur      uint64 `json:"c"`
	Max      uint64 `json:"m"`
}

// helperConfig is what the worker hands the helper (argv[1], JSON).
type helperConfig struct {
	Procs   []string `json:"procs"`
	Rlimits []rlimit `json:"rlimits"`
	Argv    []string `json:"argv"`
}

// helperMain puts this process in the tree's cgroups and under its
// rlimits, then becomes bubblewrap: everything the tree forks later is
// counted from its first instruction (cgroup v1 has no clone-into-cgroup).
func helperMain(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "capflow sandbox: "+format+"\n", a...)
		return 126
	}
	if len(args) != 1 {
		return fail("want one argument")
	}
	var cfg helperConfig
	if err := json.Unmarshal([]byte(args[0]), &cfg); err != nil || len(cfg.Argv) == 0 {
		return fail("bad configuration: %v", err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, f := range cfg.Procs {
		if err := os.WriteFile(f, pid, 0o644); err != nil {
			return fail("cannot join cgroup: %v", err)
		}
	}
	for _, l := range cfg.Rlimits {
		if err := syscall.Setrlimit(l.Resource, &syscall.Rlimit{Cur: l.Cur, Max: l.Max}); err != nil {
			return fail("rlimit %d: %v", l.Resource, err)
		}
	}
	err := syscall.Exec(cfg.Argv[0], cfg.Argv, os.Environ())
	return fail("cannot run %s: %v", cfg.Argv[0], err)
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// initMain runs a server's command inside its sandbox and lives as long
// as any process of its tree does: a server that daemonizes (forks and
// lets its first process exit) is adopted here rather than killed with
// the sandbox. SIGTERM and friends are caught, so a stop reaches the
// server while this init stays to reap it; exits with the command's
// status.
func initMain(argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "capflow sandbox init: no command")
		return 126
	}
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	signal.Notify(make(chan os.Signal, 8), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	path, err := exec.LookPath(argv[0])
	var p *os.Process
	if err == nil {
		p, err = os.StartProcess(path, argv, &os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
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
		}
	}
}
