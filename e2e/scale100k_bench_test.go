package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkScale100k runs 100,000 steps in one run (issue 40): a
// for_each of fast steps (text.render, in history) and one of regular
// steps (test.render, an activity each), CAPFLOW_SCALE_REGULAR of the
// 100,000 (default 5,000). It reports the time per step, the worker's and
// the CLI's peak resident memory, and the worker's memory at each tenth of
// the run, so growth with the steps done shows (docs/performance.md).
func BenchmarkScale100k(b *testing.B) {
	const n = 100000
	regular := envInt("CAPFLOW_SCALE_REGULAR", 5000)
	file := h.writePlan(&testing.T{}, "scale-100k", forEachPlan("scale-100k", n-regular, regular))
	for i := 0; i < b.N; i++ {
		samples, stop := sampleWorkerRSS()
		defer stop()
		start := time.Now()
		cmd := exec.Command(filepath.Join(h.bin, "capflow"), "run", file, "--project", h.project, "--output", "json")
		cmd.Env = h.env()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		took := time.Since(start)
		stop()
		var env struct {
			Data struct{ Status, Message string } `json:"data"`
		}
		_ = json.Unmarshal(out.Bytes(), &env)
		if err != nil || env.Data.Status != "passed" {
			b.Fatalf("%v %s: %s\n%s", err, env.Data.Status, env.Data.Message, lastLines(errb.String(), 20))
		}
		cliKB := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
		b.ReportMetric(float64(took.Microseconds())/1000/n, "ms/step")
		b.ReportMetric(float64(workerPeakKB())/1024, "worker-peak-MB")
		b.ReportMetric(float64(cliKB)/1024, "cli-peak-MB")
		var tenths []string
		for k := 1; k <= 10; k++ {
			tenths = append(tenths, fmt.Sprintf("%.0f", samples.at(float64(k)/10)/1024))
		}
		fmt.Printf("worker RSS MB at each tenth of the run: %s\n", strings.Join(tenths, " "))
	}
}

// forEachPlan is a plan of a for_each step of fast items (the core kit's
// text.render, id "fast"), then, with regular > 0, one of regular items
// (test.render).
func forEachPlan(name string, fast, regular int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nmax_parallel: 64\npolicy: {limits: {max_parallel: 64}}\nsteps:\n", name)
	list := func(n int) {
		b.WriteString("[")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%d", i)
		}
		b.WriteString("]")
	}
	b.WriteString("  - id: fast\n    capability: text.render\n    for_each: ")
	list(fast)
	b.WriteString("\n    with: {template: \"n={{.n}}\", values: {n: \"${item}\"}}\n")
	if regular > 0 {
		b.WriteString("  - id: regular\n    capability: test.render\n    needs: [fast]\n    for_each: ")
		list(regular)
		b.WriteString("\n    with: {template: \"n={{.n}}\", values: {n: \"${item}\"}}\n")
	}
	return b.String()
}

// rssSamples are the worker's resident memory (KB) sampled over a run.
type rssSamples struct {
	mu sync.Mutex
	kb []int
}

// at is the sample at fraction f (0 < f <= 1) of the run.
func (s *rssSamples) at(f float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.kb) == 0 {
		return 0
	}
	return float64(s.kb[min(max(int(f*float64(len(s.kb)))-1, 0), len(s.kb)-1)])
}

// sampleWorkerRSS samples the newest worker's VmRSS every 250 ms until
// stop is called.
func sampleWorkerRSS() (*rssSamples, func()) {
	s := &rssSamples{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				s.mu.Lock()
				s.kb = append(s.kb, workerStatusKB("VmRSS:"))
				s.mu.Unlock()
			}
		}
	}()
	var once sync.Once
	return s, func() { once.Do(func() { cancel(); <-done }) }
}

// workerStatusKB reads one of the newest worker's /proc status fields.
func workerStatusKB(field string) int {
	h.mu.Lock()
	w := h.workers[len(h.workers)-1]
	h.mu.Unlock()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kb int
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb
		}
	}
	return 0
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
