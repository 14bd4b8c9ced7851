package toolrun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/envelope"
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
	// Way is how the confined steps were confined (sandbox.WayZygote
	// where the machine has it), FloorMS that way's own cost: a tree of
	// /bin/true started and waited for, less /bin/true alone.
	Way     string  `json:"way"`
	FloorMS float64 `json:"floor_ms"`
}

// MeasureSandbox runs a no-op command step (a shell printing its
// envelope) n times unconfined and confined, alternated so the machine's
// load weighs on both alike, beside bubblewrap's floor. Each timed start
// waits for what the last tree left to put away (Settle): a step's
// latency, not its neighbour's. The tool lives in
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
	way := ""
	step := func(mode sandbox.Mode) error {
		env := r.Run(ctx, Request{Manifest: m, RunID: "bench", StepID: "s", Root: dir, Workdir: filepath.Join(dir, "step"), Sandbox: mode})
		if !env.Success {
			return fmt.Errorf("%s: %s", mode, env.Message)
		}
		if mode != sandbox.ModeOff {
			way = wayOf(env)
		}
		return nil
	}
	modes := [2]sandbox.Mode{sandbox.ModeOff, sandbox.ModeDefault}
	// Untimed: a worker's first confined steps make its pooled cgroups
	// and start their zygote, as a busy worker's steps do not.
	for try := 0; try == 0 || way != sandbox.WayZygote && try < 100; try++ {
		for _, mode := range modes {
			if err := step(mode); err != nil {
				return SandboxCost{}, err
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	var took [2]time.Duration
	var floor, own time.Duration
	bwrap := []string{"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net", "--new-session",
		"--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "/bin/true"}
	for i := 0; i < n; i++ {
		start := time.Now()
		_ = exec.CommandContext(ctx, "bwrap", bwrap...).Run()
		mid := time.Now()
		_ = exec.CommandContext(ctx, "/bin/true").Run()
		floor += mid.Sub(start) - time.Since(mid)
		sandbox.Probe().Settle()
		d, err := treeFloor(dir)
		if err != nil {
			return SandboxCost{}, err
		}
		own += d
		for k, mode := range modes {
			sandbox.Probe().Settle()
			start := time.Now()
			err := step(mode)
			took[k] += time.Since(start)
			if err != nil {
				return SandboxCost{}, err
			}
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	return SandboxCost{UnconfinedMS: ms(took[0]), ConfinedMS: ms(took[1]), OverheadMS: ms(took[1] - took[0]), BwrapFloorMS: ms(floor),
		Way: way, FloorMS: ms(own)}, nil
}

// treeFloor is one tree of /bin/true the fastest way, less /bin/true.
func treeFloor(dir string) (time.Duration, error) {
	start := time.Now()
	t, err := sandbox.Probe().Start(sandbox.Request{Argv: []string{"/bin/true"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"},
		Write: []string{dir}, Spec: sandbox.Defaults}, sandbox.Stdio{})
	if err != nil {
		return 0, err
	}
	exit, _ := t.Wait()
	t.Finish(exit, "")
	mid := time.Now()
	err = exec.Command("/bin/true").Run()
	return mid.Sub(start) - time.Since(mid), err
}

// wayOf reads how a confined step was confined from its feedback
// ("confined by zygote").
func wayOf(env envelope.Envelope) string {
	for _, f := range env.Feedback {
		if w, ok := strings.CutPrefix(f.Message, SandboxWayPrefix); ok && f.Phase == "sandbox" {
			w, _, _ = strings.Cut(w, " ")
			return w
		}
	}
	return ""
}
