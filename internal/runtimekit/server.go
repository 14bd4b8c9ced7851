package runtimekit

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/realpath"
	"github.com/capflow/capflow/internal/sandbox"
)

func init() {
	builtin.Register("server.start", serverStart, builtin.Traits{StartsProcesses: true, Network: true})
	builtin.Register("server.wait_ready", serverWaitReady, builtin.Traits{Network: true})
	builtin.Register("server.stop", serverStop, builtin.Traits{})
	builtin.Register("logs.collect", logsCollect, builtin.Traits{})
	builtin.Register("run.finalize", runFinalize, builtin.Traits{})
	builtin.Register("browser.run", browserRun, builtin.Traits{Network: true})
}

// Readiness says when a started server is ready.
type Readiness struct {
	Type    string `json:"type"` // http, tcp or log
	Target  string `json:"target"`
	Timeout string `json:"timeout,omitempty"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// decode turns a step's inputs into a struct (the schema checked them).
func decode(in map[string]any, out any) error {
	b, _ := json.Marshal(in)
	if err := json.Unmarshal(b, out); err != nil {
		return caperr.New(caperr.InvalidInput, "inputs: %v", err)
	}
	return nil
}

func duration(field, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, caperr.New(caperr.InvalidInput, "%s %q is not a duration like 20s or 2m", field, s)
	}
	return d, nil
}

type startInput struct {
	Name      string            `json:"name"`
	Command   []string          `json:"command"`
	Cwd       string            `json:"cwd"`
	Env       map[string]string `json:"env"`
	Port      int               `json:"port"`
	Readiness *Readiness        `json:"readiness"`
}

// check refuses inputs the schema cannot: a bad name, an empty command,
// no run folder, a readiness timeout that is no duration.
func (in startInput) check(env *builtin.Env) error {
	if !nameRE.MatchString(in.Name) {
		return caperr.New(caperr.InvalidInput, "name %q: letters, digits, '.', '_' or '-'", in.Name)
	}
	if len(in.Command) == 0 || in.Command[0] == "" {
		return caperr.New(caperr.InvalidInput, "command is empty")
	}
	if env.RunDir == "" {
		return caperr.New(caperr.InvalidInput, "server.start runs inside a run (it needs the run folder)")
	}
	if in.Readiness != nil {
		if _, err := duration("readiness.timeout", in.Readiness.Timeout, 0); err != nil {
			return err
		}
	}
	return nil
}

// serverStart starts a process that outlives its step, records it in
// processes.json and, with readiness, waits until it is ready.
func serverStart(ctx context.Context, raw map[string]any, env *builtin.Env) (any, error) {
	var in startInput
	if err := decode(raw, &in); err != nil {
		return nil, err
	}
	if err := in.check(env); err != nil {
		return nil, err
	}
	cwd := env.Root
	if in.Cwd != "" {
		// Symlinks resolved: a link inside the project that leads out of
		// it is refused like every other builtin's path.
		p, err := inside(env, "cwd", in.Cwd)
		if err != nil {
			return nil, err
		}
		cwd = p
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return nil, caperr.New(caperr.InvalidInput, "cwd %q is not a folder", in.Cwd)
	}
	reg, err := ReadRegistry(env.RunDir)
	if err != nil {
		return nil, err
	}
	for _, r := range reg.Processes {
		if r.Name == in.Name && r.StoppedAt == "" && r.Verify(env.RunDir) == "" {
			return nil, caperr.New(caperr.InvalidInput, "a server named %q is already running in this run (pid %d)", in.Name, r.PID)
		}
	}
	if in.Port > 0 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", in.Port))
		if err != nil {
			return nil, caperr.New(caperr.StartupError, "port %d is already taken: %v", in.Port, err)
		}
		l.Close()
	}
	bin, err := exec.LookPath(in.Command[0])
	if err != nil && !strings.Contains(in.Command[0], "/") {
		return nil, caperr.New(caperr.StartupError, "command %q not found on PATH", in.Command[0])
	} else if err != nil {
		bin = in.Command[0]
		if !filepath.IsAbs(bin) {
			bin = filepath.Join(cwd, bin)
		}
	}
	cmd, logPath, token, pub, err := launch(env, in, bin, cwd)
	if err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { // reaps it whenever it ends
		err := cmd.Wait()
		pub.close()
		exited <- err
	}()
	pid := cmd.Process.Pid
	ticks, err := startTicks(pid)
	if err != nil {
		return nil, caperr.New(caperr.StartupError, "%s exited at once: %s", in.Name, tail(logPath))
	}
	argv := append([]string{bin}, in.Command[1:]...)
	rec := Record{Name: in.Name, PID: pid, PGID: pid, StartTicks: ticks, Argv: argv, Cwd: cwd, LogPath: logPath,
		Hash: ownership(env.RunDir, pid, ticks, argv, cwd), Token: token, StartedAt: now(), Readiness: in.Readiness}
	rec.Seal = sealOf(env.RunDir, rec)
	if err := withRegistry(env.RunDir, func(reg *Registry) error { reg.Processes = append(reg.Processes, rec); return nil }); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "cannot record the process")
	}
	env.Feedback.Info("start", fmt.Sprintf("started %s (pid %d), log %s", in.Name, pid, logPath))
	data := map[string]any{"pid": pid, "pgid": pid, "log_path": logPath, "ownership_hash": rec.Hash}
	if in.Readiness == nil {
		return data, nil
	}
	ready, err := probe(ctx, rec, exited, env.Rules())
	for k, v := range ready {
		data[k] = v
	}
	if err != nil {
		// Not ready: nothing is left running.
		_, _ = Stop(env.RunDir, in.Name, 2*time.Second)
		return data, err
	}
	pub.scan() // ready: what it listens on by now is the run's at once
	return data, nil
}

// namedPorts are the loopback ports a server's inputs name: its port and
// its readiness target's.
func namedPorts(in startInput) []uint16 {
	var out []uint16
	if in.Port > 0 && in.Port < 65536 {
		out = append(out, uint16(in.Port))
	}
	if rd := in.Readiness; rd != nil && (rd.Type == "http" || rd.Type == "tcp") {
		hostport := rd.Target
		if rd.Type == "http" {
			hostport = egress.HostPort(rd.Target)
		}
		if _, p, err := net.SplitHostPort(hostport); err == nil {
			if n, err := strconv.ParseUint(p, 10, 16); err == nil && n > 0 && !slices.Contains(out, uint16(n)) {
				out = append(out, uint16(n))
			}
		}
	}
	return out
}

// launch starts the server with its log file as stdout and stderr, and
// the run's ownership token last in its environment (the plan's env
// cannot replace it).
func launch(env *builtin.Env, in startInput, bin, cwd string) (*exec.Cmd, string, string, *publisher, error) {
	logDir := filepath.Join(env.RunDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, "", "", nil, caperr.Wrap(caperr.ObservabilityError, err, "logs folder")
	}
	logPath := filepath.Join(logDir, in.Name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, "", "", nil, caperr.Wrap(caperr.ObservabilityError, err, "log file")
	}
	defer logf.Close()
	vars := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8"}
	if in.Port > 0 {
		vars = append(vars, fmt.Sprintf("PORT=%d", in.Port))
	}
	for k, v := range in.Env {
		vars = append(vars, k+"="+v)
	}
	token := newToken(env.RunDir)
	vars = append(vars, OwnerEnv+"="+token)
	cmd, tree, err := serverCommand(env, append([]string{bin}, in.Command[1:]...), cwd, vars)
	if err != nil {
		return nil, "", "", nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if tree != nil {
		err = tree.Start()
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return nil, "", "", nil, caperr.New(caperr.StartupError, "cannot start %s: %v", in.Name, err)
	}
	var pub *publisher
	if tree != nil {
		pub = publish(env.RunDir, tree, func(why string) {
			env.Feedback.Warn("network", fmt.Sprintf("%s: %s", in.Name, why))
		})
	} else {
		pub = hostRoutes(env.RunDir, namedPorts(in))
	}
	return cmd, logPath, token, pub, nil
}

// serverCommand is the server's command: confined (its own PID and
// network namespaces, its step's folder writable, the network through the
// run's egress proxy when the manifest declares it)
// unless the policy says sandbox: off or, by default, the machine cannot
// confine. Its own process group either way: stopped as a whole, and
// untouched by signals meant for the worker.
func serverCommand(env *builtin.Env, argv []string, cwd string, vars []string) (*exec.Cmd, *sandbox.Tree, error) {
	plain := func() *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env, cmd.SysProcAttr = cwd, vars, &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	if env.Sandbox == sandbox.ModeOff {
		return plain(), nil, nil
	}
	sup := sandbox.Probe()
	if why := sup.Missing(); why != "" {
		if env.Sandbox == sandbox.ModeRequired {
			return nil, nil, caperr.New(caperr.ConfigError, "the policy says sandbox: required, but this machine cannot confine the server: %s", why)
		}
		env.Feedback.Warn("sandbox", "server runs unconfined (policy sandbox: default): "+why)
		return plain(), nil, nil
	}
	// The step's write folders, opened before it started (the engine's
	// protected list checked); alone (tools run), opened here.
	folders, owned := env.Folders, false
	if folders == nil {
		var err error
		if folders, err = sandbox.OpenWrites(env.Confine, env.Root, env.Protected...); err != nil {
			return nil, nil, caperr.New(caperr.ConfigError, "server.start: %v", err)
		}
		owned = true
	}
	// Each folder where it really is, as the sandbox binds it (a project
	// reached through a link showed its runs and state by the link's name:
	// found attacking).
	root, cwd := realpath.Of(env.Root), realpath.Of(cwd)
	spec := sandbox.SpecWith(env.Confine, root, folders)
	EnsureOwnerKey()
	// Its own folder, the step's, and nothing else of the run: the run's
	// records and other steps' outputs stay out of its reach.
	own := env.Workdir
	if own == "" {
		own = filepath.Join(env.RunDir, "servers")
	}
	if err := os.MkdirAll(own, 0o755); err != nil {
		return nil, nil, caperr.Wrap(caperr.ObservabilityError, err, "the server's folder")
	}
	req := sandbox.Request{Argv: argv, Dir: cwd, Env: vars, Read: []string{root, cwd},
		Write: []string{realpath.Of(own)}, Hide: []string{OwnerKeyPath()}, Spec: spec, Server: true, Folders: folders, Private: env.Private}
	if spec.Network {
		rules := env.Rules()
		req.Outbound = builtin.Outbound(rules, filepath.Base(env.RunDir)+"/server", nil)
		req.Mirror, req.Relay = rules.LoopbackPorts(), builtin.Relay(rules)
	}
	cmd, tree, err := sup.Command(req)
	if owned {
		// bubblewrap holds its own copies of the handles once it has started.
		if err != nil {
			folders.Close()
		} else {
			tree.AfterStart(folders.Close)
		}
	}
	if err != nil {
		return nil, nil, caperr.New(caperr.StartupError, "cannot confine the server: %v", err)
	}
	return cmd, tree, nil
}

func serverWaitReady(ctx context.Context, raw map[string]any, env *builtin.Env) (any, error) {
	var in struct {
		Name    string `json:"name"`
		Timeout string `json:"timeout"`
	}
	if err := decode(raw, &in); err != nil {
		return nil, err
	}
	reg, err := ReadRegistry(env.RunDir)
	if err != nil {
		return nil, err
	}
	for i := len(reg.Processes) - 1; i >= 0; i-- {
		r := reg.Processes[i]
		if r.Name != in.Name {
			continue
		}
		if r.Readiness == nil {
			return nil, caperr.New(caperr.InvalidInput, "server %q was started without readiness: nothing to wait for", in.Name)
		}
		if in.Timeout != "" {
			rd := *r.Readiness
			rd.Timeout = in.Timeout
			r.Readiness = &rd
		}
		if why := r.Verify(env.RunDir); why != "" {
			return map[string]any{"ready": false, "checked_at": now(), "probe_evidence": []string{why}}, caperr.New(caperr.StartupError, "%s: %s; %s", in.Name, why, tail(r.LogPath))
		}
		return probe(ctx, r, nil, env.Rules())
	}
	return nil, caperr.New(caperr.InvalidInput, "the run started no server named %q", in.Name)
}

func serverStop(ctx context.Context, raw map[string]any, env *builtin.Env) (any, error) {
	var in struct {
		Name  string `json:"name"`
		Grace string `json:"grace"`
	}
	if err := decode(raw, &in); err != nil {
		return nil, err
	}
	grace, err := duration("grace", in.Grace, 5*time.Second)
	if err != nil {
		return nil, err
	}
	res, err := Stop(env.RunDir, in.Name, grace)
	return map[string]any{"stopped": res.Stopped, "skipped": res.Skipped}, err
}
