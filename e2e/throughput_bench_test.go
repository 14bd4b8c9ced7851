package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	capclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/embed"
	"github.com/capflow/capflow/internal/procfs"
	"github.com/capflow/capflow/internal/toolrun"
)

// Throughput is bench-throughput.json (docs/performance.md).
type Throughput struct {
	Runs map[string]PeerThroughput `json:"runs"`
	// Ratios are a row's runs/s over the row it is measured against
	// ("capflow-fast/temporal-empty"): the median, over the repetitions,
	// of the two batches' ratio in each, which ran one after the other
	// (runBlocks). This machine's rate drifts by a tenth to a third
	// within a run; a ratio of medians taken minutes apart carried that.
	Ratios map[string]float64 `json:"ratios"`
	// Sandbox is a confined step's cost beside an unconfined one's.
	Sandbox toolrun.SandboxCost `json:"sandbox"`
}

// PeerThroughput is one system's medians over the repetitions.
type PeerThroughput struct {
	RunsPerS float64 `json:"runs_per_s"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	// WorkerCPUMSPerRun is the CPU its worker spent per run: capflow's
	// worker process; the hand-written workflow's worker runs in this
	// process (with the clients that start the runs, so it is counted
	// high); Restate's service process (its server's is not counted).
	WorkerCPUMSPerRun float64 `json:"worker_cpu_ms_per_run"`
	// ServerCPUMSPerRun is its server's CPU per run: the Temporal dev
	// server's (the three Temporal rows share it), Restate's server's. On
	// one 2-core machine the server is most of what a run costs.
	ServerCPUMSPerRun float64 `json:"server_cpu_ms_per_run"`
}

// startEmbedded starts an embedded capflow worker in this process on a
// queue of its own (package embed), for eager starts.
func startEmbedded(b *testing.B) *embed.Worker {
	w, err := embed.Start(context.Background(), h.client, embed.Options{Project: h.project, TaskQueue: "capflow-eager"})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// runEager runs plan on the embedded worker, started eagerly; every step
// must have run inline.
func runEager(w *embed.Worker, plan map[string]any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, err := w.Client().StartWith(ctx, capclient.StartOptions{Eager: true}, capclient.Input{Plan: plan})
	if err != nil {
		return err
	}
	res, err := run.Wait(ctx)
	if err != nil || res.Status != "passed" {
		return fmt.Errorf("%v %+v", err, res)
	}
	for _, s := range res.Steps {
		if s.Execution != "inline" {
			return fmt.Errorf("step %s ran %q, not inline", s.ID, s.Execution)
		}
	}
	return nil
}

// BenchmarkThroughput is `make bench-throughput`: N runs at once
// (CAPFLOW_THROUGHPUT_RUNS, 300) of a 3-step chain on capflow's regular
// path, its fastest path, the hand-written Temporal workflow (3 in-process
// no-op activities), the same with no activity (the server's floor), the
// floor with what every capflow run records (temporal-recorded) and
// Restate (3 restate.Run), one after another on one dev server, each
// batch once the last one's leftovers are done (settle), repeated
// (CAPFLOW_THROUGHPUT_REPS, 5) in an order that changes but keeps each
// row beside the one it is measured against (runBlocks, batchOrder);
// medians and paired ratios are written to bench-throughput.json with
// the sandbox's cost.
func BenchmarkThroughput(b *testing.B) {
	defer startMinimal(b)()
	rs := startRestate(b)
	defer rs.stop()
	defer unconfined(b)()
	n, reps := envInt("CAPFLOW_THROUGHPUT_RUNS", 300), envInt("CAPFLOW_THROUGHPUT_REPS", 5)
	render := map[string]any{"template": "ok"}
	server := devServerCPU(b)
	eager := startEmbedded(b)
	defer eager.Stop()
	systems := []struct {
		name        string
		run         func() error
		cpu, server func() float64
	}{
		{"capflow", func() error { return runCapflow(capflowPlanOf("test.render", render, 3, true), "activity") }, h.workerCPU, server},
		{"temporal", func() error { return runMinimal("", 3, false) }, ownCPU, server},
		// The floor plus the Version marker and the status upsert every
		// capflow run records (recordedWorkflow): the least this design
		// can cost on this server.
		{"temporal-recorded", runRecorded, ownCPU, server},
		{"capflow-fast", func() error { return runCapflow(capflowPlanOf("text.render", render, 3, true), "inline") }, h.workerCPU, server},
		// The server's floor: the hand-written workflow with no activity (a
		// start, one workflow task, its end), what no workflow-per-run path
		// on this server can pass.
		{"temporal-empty", func() error { return runMinimal("", 0, false) }, ownCPU, server},
		// The fastest path started eagerly by a Go service embedding a
		// worker (this process: its CPU is counted with the clients').
		{"capflow-eager", func() error { return runEager(eager, capflowPlanOf("text.render", render, 3, true)) }, ownCPU, server},
		{"restate", func() error { return rs.invoke("Chain", 3) }, rs.cpu, rs.serverCPU},
	}
	if only := os.Getenv("CAPFLOW_THROUGHPUT_SYSTEMS"); only != "" { // e.g. capflow,temporal
		systems = slices.DeleteFunc(systems, func(s struct {
			name        string
			run         func() error
			cpu, server func() float64
		}) bool {
			return !slices.Contains(strings.Split(only, ","), s.name)
		})
	}
	quiet := []func() float64{server, rs.serverCPU, rs.cpu, h.workerCPU, ownCPU}
	seen := map[string][]throughputSample{}
	names := make([]string, len(systems))
	for i, s := range systems {
		names[i] = s.name
	}
	for r := -1; r < reps; r++ { // r = -1: a warm-up of 20 runs, not counted
		for _, k := range batchOrder(names, max(r, 0)) {
			s := systems[k]
			runs := n
			if r < 0 {
				runs = 20
			}
			// What the last batch left running ends first: in the old fixed
			// rotation capflow always came right after Restate, and one such
			// batch ran at a third of its usual rate.
			waited := settle(quiet, 30*time.Second)
			sample, err := atOnce(runs, s.run, s.cpu, s.server)
			if err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
			if r >= 0 {
				seen[s.name] = append(seen[s.name], sample)
				fmt.Printf("repetition %d: %-17s %7.1f runs/s (after %.1f s for quiet)\n", r+1, s.name, sample.runsPerS, waited.Seconds())
			}
		}
	}
	out := Throughput{Runs: map[string]PeerThroughput{}, Ratios: pairedRatios(seen)}
	for name, samples := range seen {
		out.Runs[name] = medianThroughput(samples)
	}
	cost, err := toolrun.MeasureSandbox(context.Background(), h.repo, 30)
	if err != nil {
		b.Fatal(err)
	}
	out.Sandbox = cost
	printThroughput(b, out, n, reps)
	raw, _ := json.MarshalIndent(out, "", "  ")
	if err := os.WriteFile(filepath.Join(h.repo, "bench-throughput.json"), append(raw, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
}

// throughputSample is one batch of runs started at once.
type throughputSample struct {
	runsPerS, cpuPerRun, serverPerRun float64
	latencies                         []float64 // ms, each run's
}

// atOnce starts n runs at once and waits for them all; cpu and server
// read the worker's and the server's CPU time (ms).
func atOnce(n int, run func() error, cpu, server func() float64) (throughputSample, error) {
	cpu0, server0 := cpu(), server()
	start := time.Now()
	lat := make([]float64, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			if err := run(); err != nil {
				errs <- err
			}
			lat[i] = float64(time.Since(t).Microseconds()) / 1000
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return throughputSample{}, err
	}
	return throughputSample{runsPerS: float64(n) / wall.Seconds(), cpuPerRun: (cpu() - cpu0) / float64(n),
		serverPerRun: (server() - server0) / float64(n), latencies: lat}, nil
}

func medianThroughput(ss []throughputSample) PeerThroughput {
	var rate, cpu, server, p50, p99 []float64
	for _, s := range ss {
		l := slices.Sorted(slices.Values(s.latencies))
		rate, cpu, server = append(rate, s.runsPerS), append(cpu, s.cpuPerRun), append(server, s.serverPerRun)
		p50, p99 = append(p50, l[len(l)/2]), append(p99, l[min(len(l)-1, len(l)*99/100)])
	}
	return PeerThroughput{RunsPerS: round2(median(rate)), P50MS: round2(median(p50)), P99MS: round2(median(p99)),
		WorkerCPUMSPerRun: round2(median(cpu)), ServerCPUMSPerRun: round2(median(server))}
}

func printThroughput(b *testing.B, out Throughput, n, reps int) {
	t := out.Runs["temporal"].RunsPerS
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d runs of a 3-step chain at once, medians of %d repetitions (bench-throughput.json)\n", n, reps)
	fmt.Fprintf(&sb, "%-17s %9s %9s %9s %12s %12s %10s\n", "system", "runs/s", "p50 ms", "p99 ms", "worker ms/run", "server ms/run", "x temporal")
	for _, name := range slices.Concat(runBlocks...) {
		r, ok := out.Runs[name]
		if !ok {
			continue // left out by CAPFLOW_THROUGHPUT_SYSTEMS
		}
		fmt.Fprintf(&sb, "%-17s %9.1f %9.1f %9.1f %12.2f %12.2f %10.2f\n", name, r.RunsPerS, r.P50MS, r.P99MS, r.WorkerCPUMSPerRun, r.ServerCPUMSPerRun, r.RunsPerS/t)
	}
	// The ratios that decide, paired batch by batch (pairedRatios).
	var ratios []string
	for _, p := range ratioPairs {
		if v, ok := out.Ratios[p[0]+"/"+p[1]]; ok {
			ratios = append(ratios, fmt.Sprintf("%s %.2f", p[0]+"/"+p[1], v))
			b.ReportMetric(v, p[0]+"/"+p[1])
		}
	}
	if len(ratios) > 0 {
		fmt.Fprintf(&sb, "paired ratios (medians over the repetitions): %s\n", strings.Join(ratios, ", "))
	}
	c := out.Sandbox
	fmt.Fprintf(&sb, "sandbox (%s): unconfined %.2f ms, confined %.2f ms, overhead %.2f ms (%.2fx the unconfined step), %s's floor %.2f ms, bubblewrap's floor %.2f ms\n",
		c.Way, c.UnconfinedMS, c.ConfinedMS, c.OverheadMS, c.OverheadMS/c.UnconfinedMS, c.Way, c.FloorMS, c.BwrapFloorMS)
	fmt.Print(sb.String())
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

// ownCPU is this process's CPU time so far, in ms.
func ownCPU() float64 { return processCPU(os.Getpid()) }

// workerCPU is the CPU time of the harness's live workers, in ms.
func (h *harness) workerCPU() float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0.0
	for _, w := range h.workers {
		if w.Process != nil && w.ProcessState == nil {
			total += processCPU(w.Process.Pid)
		}
	}
	return total
}

// cpu is the Restate service process's CPU time, in ms.
func (rs *restatePeer) cpu() float64 {
	if rs.svc == nil || rs.svc.Process == nil {
		return 0
	}
	return processCPU(rs.svc.Process.Pid)
}

// serverCPU is the Restate server's CPU time, in ms (its process and
// what it started: the npm package's binary may be a launcher).
func (rs *restatePeer) serverCPU() float64 {
	if rs.server == nil || rs.server.Process == nil {
		return 0
	}
	total := 0.0
	for _, pid := range treeOf(rs.server.Process.Pid) {
		total += processCPU(pid)
	}
	return total
}

// treeOf is pid and its descendants.
func treeOf(pid int) []int {
	parent := map[int]int{}
	for _, p := range procfs.Pids() {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:])); len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		for p, pp := range parent {
			if pp == out[i] {
				out = append(out, p)
			}
		}
	}
	return out
}

// devServerCPU reads the CPU time of the harness's dev server (the
// temporal process serving h.address).
func devServerCPU(b *testing.B) func() float64 {
	_, port, _ := strings.Cut(h.address, ":")
	for _, pid := range procfs.Pids() {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(raw), "\x00")
		if slices.Contains(args, "start-dev") && slices.Contains(args, port) {
			return func() float64 { return processCPU(pid) }
		}
	}
	b.Fatalf("no dev server process serves %s", h.address)
	return nil
}

// processCPU is a process's user and system CPU time in ms (/proc).
func processCPU(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: utime is the 12th,
	// stime the 13th (in clock ticks, 100 a second on Linux).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) * 10
}
