package toolrun

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// BenchmarkSandbox is the cost of confinement: a no-op command step
// (a shell printing its envelope) unconfined and confined, alternated in
// one run so the machine's load weighs on both alike, and bubblewrap's own
// floor on this machine (bwrap with the same namespaces running /bin/true,
// less /bin/true alone). docs/performance.md reports them.
func BenchmarkSandbox(b *testing.B) {
	if why := sandbox.Probe().Missing(); why != "" {
		b.Fatalf("this machine cannot confine: %s", why)
	}
	// The project outside /tmp, as in production: the sandbox's private
	// /tmp hides what is under it, so paths there cost a bind mount each.
	dir, err := os.MkdirTemp(".", "bench-project-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dir, _ = filepath.Abs(dir)
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho '"+okEnvelope+"'\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	m := &manifest.Manifest{Name: "t", Version: "1.0.0", Dir: dir,
		Entrypoint: manifest.Entrypoint{Type: manifest.EntryCommand, Command: []string{"./run.sh"}, Result: manifest.ResultEnvelope}}
	r := &Runner{}
	var took [2]time.Duration
	var floor time.Duration
	modes := [2]sandbox.Mode{sandbox.ModeOff, sandbox.ModeDefault}
	bwrap := []string{"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net", "--new-session",
		"--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "/bin/true"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		_ = exec.Command("bwrap", bwrap...).Run()
		mid := time.Now()
		_ = exec.Command("/bin/true").Run()
		floor += mid.Sub(start) - time.Since(mid)
		for k, mode := range modes {
			start := time.Now()
			env := r.Run(context.Background(), Request{Manifest: m, RunID: "bench", StepID: "s", Root: dir,
				Workdir: filepath.Join(dir, "step"), Sandbox: mode})
			took[k] += time.Since(start)
			if !env.Success {
				b.Fatalf("%s: %+v", mode, env)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(took[0].Microseconds())/1000/n, "ms-unconfined")
	b.ReportMetric(float64(took[1].Microseconds())/1000/n, "ms-confined")
	b.ReportMetric(float64((took[1]-took[0]).Microseconds())/1000/n, "ms-overhead")
	b.ReportMetric(float64(floor.Microseconds())/1000/n, "ms-bwrap-floor")
}
