package toolrun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
)

// BenchmarkCommandStep runs an unconfined `true` (result: exit_code)
// through the runner, a new step folder each time, beside `true` run
// bare: what the runner adds to a fork/exec (the peers' shell chain,
// docs/performance.md).
func BenchmarkCommandStep(b *testing.B) {
	dir, _ := filepath.Abs(b.TempDir())
	m := &manifest.Manifest{Name: "t", Version: "1.0.0", Dir: dir,
		Entrypoint: manifest.Entrypoint{Type: manifest.EntryCommand, Command: []string{"true"}, Result: manifest.ResultExitCode}}
	r := &Runner{}
	var bare, step time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		_ = exec.Command("true").Run()
		mid := time.Now()
		env := r.Run(context.Background(), Request{Manifest: m, RunID: "bench", StepID: "s", Root: dir, Inputs: map[string]any{},
			Workdir: filepath.Join(dir, "steps", fmt.Sprint(i)), Sandbox: sandbox.ModeOff})
		step += time.Since(mid)
		bare += mid.Sub(start)
		if !env.Success {
			b.Fatalf("%+v", env)
		}
	}
	_ = os.RemoveAll(filepath.Join(dir, "steps"))
	b.ReportMetric(float64(bare.Microseconds())/float64(b.N), "bare-µs")
	b.ReportMetric(float64(step.Microseconds())/float64(b.N), "step-µs")
}
