package toolrun

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/sandbox"
)

// BenchmarkSandbox is the cost of confinement: a no-op command step
// (a shell printing its envelope) unconfined and confined, alternated in
// one run so the machine's load weighs on both alike. docs/performance.md
// reports confined-ms - unconfined-ms: the target is at most 5 ms a step.
func BenchmarkSandbox(b *testing.B) {
	if why := sandbox.Probe().Missing(); why != "" {
		b.Fatalf("this machine cannot confine: %s", why)
	}
	dir := b.TempDir()
	m := script(&testing.T{}, "echo '"+okEnvelope+"'")
	r := &Runner{}
	var took [2]time.Duration
	modes := [2]sandbox.Mode{sandbox.ModeOff, sandbox.ModeDefault}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
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
}
