package toolrun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// SandboxCost is what confinement costs a no-op command step on this
// machine, in milliseconds per step (docs/performance.md).
type SandboxCost struct {
	UnconfinedMS float64 `json:"unconfined_ms"`
	ConfinedMS   float64 `json:"confined_ms"`
	OverheadMS   float64 `json:"overhead_ms"`
	// BwrapFloorMS is bubblewrap's own cost with the same namespaces:
	// bwrap running /bin/true, less /bin/true alone.
	BwrapFloorMS float64 `json:"bwrap_floor_ms"`
}

// MeasureSandbox runs a no-op command step (a shell printing its
// envelope) n times unconfined and confined, alternated so the machine's
// load weighs on both alike, beside bubblewrap's floor. The tool lives in
// a folder made under dir (outside /tmp, as a project is: the sandbox's
// private /tmp hides what is under it).
func MeasureSandbox(ctx context.Context, dir string, n int) (SandboxCost, error) {
	if why := sandbox.Probe().Missing(); why != "" {
		return SandboxCost{}, fmt.Errorf("this machine cannot confine: %s", why)
	}
	dir, err := os.MkdirTemp(dir, "sandbox-cost-")
	if err != nil {
		return SandboxCost{}, err
	}
	defer os.RemoveAll(dir)
	dir, _ = filepath.Abs(dir)
	const ok = `{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:00Z","message":"ok","feedback":[],"data":{"n":1}}`
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho '"+ok+"'\n"), 0o755); err != nil {
		return SandboxCost{}, err
	}
	m := &manifest.Manifest{Name: "t", Version: "1.0.0", Dir: dir,
		Entrypoint: manifest.Entrypoint{Type: manifest.EntryCommand, Command: []string{"./run.sh"}, Result: manifest.ResultEnvelope}}
	r := &Runner{}
	step := func(mode sandbox.Mode) error {
		if env := r.Run(ctx, Request{Manifest: m, RunID: "bench", StepID: "s", Root: dir, Workdir: filepath.Join(dir, "step"), Sandbox: mode}); !env.Success {
			return fmt.Errorf("%s: %s", mode, env.Message)
		}
		return nil
	}
	modes := [2]sandbox.Mode{sandbox.ModeOff, sandbox.ModeDefault}
	// Once each, untimed: a worker's first confined step makes its pooled
	// cgroups, as a busy worker's steps do not.
	for _, mode := range modes {
		if err := step(mode); err != nil {
			return SandboxCost{}, err
		}
	}
	var took [2]time.Duration
	var floor time.Duration
	bwrap := []string{"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net", "--new-session",
		"--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "/bin/true"}
	for i := 0; i < n; i++ {
		start := time.Now()
		_ = exec.CommandContext(ctx, "bwrap", bwrap...).Run()
		mid := time.Now()
		_ = exec.CommandContext(ctx, "/bin/true").Run()
		floor += mid.Sub(start) - time.Since(mid)
		for k, mode := range modes {
			start := time.Now()
			err := step(mode)
			took[k] += time.Since(start)
			if err != nil {
				return SandboxCost{}, err
			}
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	return SandboxCost{UnconfinedMS: ms(took[0]), ConfinedMS: ms(took[1]), OverheadMS: ms(took[1] - took[0]), BwrapFloorMS: ms(floor)}, nil
}
