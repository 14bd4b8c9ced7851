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

	"github.com/capflow/capflow/internal/wfapi"
)

// BenchmarkScale100k runs 100,000 steps in one run (issue 40): a
// for_each of fast steps (text.render, in history) and one of regular
// steps (test.render, an activity each), CAPFLOW_SCALE_REGULAR of the
// 100,000 (default 5,000). It reports the time per step, the worker's and
// the CLI's peak resident memory, and the worker's memory each time
// another 10,000 steps had ended (the run's progress query, read with each
// sample), so growth with the steps done shows (docs/performance.md).
func BenchmarkScale100k(b *testing.B) {
	const n = 100000
	regular := envInt("CAPFLOW_SCALE_REGULAR", 5000)
	file := h.writePlan(&testing.T{}, "scale-100k", forEachPlan("scale-100k", n-regular, regular))
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("scale-100k-%d-%d", time.Now().UnixNano(), i)
		samples, stop := sampleWorkerRSS(stepsEnded(id))
		defer stop()
		start := time.Now()
		cmd := exec.Command(filepath.Join(h.bin, "capflow"), "run", file, "--project", h.project, "--output", "json", "--id", id)
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
		var per []string
		for k := 1; k <= n/10000; k++ {
			per = append(per, fmt.Sprintf("%.0f", samples.atSteps(k*10000)/1024))
		}
		fmt.Printf("worker RSS MB once each 10,000 steps had ended: %s\n", strings.Join(per, " "))
	}
}

// stepsEnded counts the steps of run id that have ended (a for_each
// step's items each count), from its progress query. A step is counted at
// the most it was ever seen at: after the run continues as new, an ended
// for_each step of an earlier segment no longer lists its items.
func stepsEnded(id string) func() int {
	seen := map[string]int{}
	return func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		v, err := h.client.QueryWorkflow(ctx, id, "", wfapi.ProgressQuery)
		var res wfapi.Result
		if err == nil && v.Get(&res) == nil {
			for _, s := range res.Steps {
				n := 0
				switch c := s.ItemCounts; {
				case c != nil:
					n = c.Succeeded + c.Failed + c.Skipped
				case s.Status != wfapi.StepPending && s.Status != wfapi.StepRunning:
					n = 1
				}
				seen[s.ID] = max(seen[s.ID], n)
			}
		}
		ended := 0
		for _, n := range seen {
			ended += n
		}
		return ended
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

// rssSamples are the worker's resident memory (KB) sampled over a run,
// each with the steps ended then.
type rssSamples struct {
	mu    sync.Mutex
	kb    []int
	steps []int
}

// atSteps is the first sample taken once n steps had ended (the last one
// when the run ended before a sample saw n).
func (s *rssSamples) atSteps(n int) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, done := range s.steps {
		if done >= n {
			return float64(s.kb[i])
		}
	}
	if len(s.kb) == 0 {
		return 0
	}
	return float64(s.kb[len(s.kb)-1])
}

// sampleWorkerRSS samples the newest worker's VmRSS, and the steps ended
// (progress), every 250 ms until stop is called.
func sampleWorkerRSS(progress func() int) (*rssSamples, func()) {
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
				steps := progress()
				s.mu.Lock()
				s.kb, s.steps = append(s.kb, workerStatusKB("VmRSS:")), append(s.steps, steps)
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
	w := h.main
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
