package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// The baseline: the least a hand-written Temporal workflow does to run the
// same no-op command tool, one activity per step.

const minimalQueue = "minimal-baseline"

func minimalNoop(ctx context.Context, tool string) error {
	dir, err := os.MkdirTemp("", "minimal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, tool)
	cmd.Stdin = bytes.NewReader([]byte("{}"))
	cmd.Env = append(os.Environ(), "CAPFLOW_OUTPUT_PATH="+filepath.Join(dir, "out.json"))
	if err := cmd.Run(); err != nil {
		return err
	}
	_, err = os.ReadFile(filepath.Join(dir, "out.json"))
	return err
}

// minimalInProcess is the in-process no-op: the least an activity can be.
func minimalInProcess(ctx context.Context, tool string) error { return nil }

// minimalTrue runs a `true` process (the peers' shell chain).
func minimalTrue(ctx context.Context, tool string) error {
	return exec.CommandContext(ctx, "true").Run()
}

// minimalWorkflow runs steps regular activities: the command tool, or the
// in-process no-op when tool is "".
func minimalWorkflow(ctx workflow.Context, tool string, steps int, parallel bool) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
	act := any(minimalNoop)
	switch tool {
	case "":
		act = minimalInProcess
	case "true":
		act = minimalTrue
	}
	if !parallel {
		for i := 0; i < steps; i++ {
			if err := workflow.ExecuteActivity(ctx, act, tool).Get(ctx, nil); err != nil {
				return err
			}
		}
		return nil
	}
	fs := make([]workflow.Future, steps)
	for i := range fs {
		fs[i] = workflow.ExecuteActivity(ctx, act, tool)
	}
	for _, f := range fs {
		if err := f.Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// recordedWorkflow is the server's floor plus what every capflow run
// records however little it does: one Version marker (its code's
// baseline, which the Go SDK also upserts as TemporalChangeVersion) and
// its status, which the contract keeps current in CapflowStatus (an
// upsert). Each upsert is a visibility write on the server.
func recordedWorkflow(ctx workflow.Context) error {
	_ = workflow.GetVersion(ctx, "baseline", workflow.DefaultVersion, 1)
	return workflow.UpsertTypedSearchAttributes(ctx, temporal.NewSearchAttributeKeyKeyword(wfapi.SearchAttrStatus).ValueSet("passed"))
}

func capflowPlan(steps int, chain bool) map[string]any {
	return capflowPlanOf("test.noop", nil, steps, chain)
}

func capflowPlanOf(capability string, with map[string]any, steps int, chain bool) map[string]any {
	var list []any
	for i := 0; i < steps; i++ {
		s := map[string]any{"id": fmt.Sprintf("s%04d", i), "capability": capability}
		if with != nil {
			s["with"] = with
		}
		if chain && i > 0 {
			s["needs"] = []any{fmt.Sprintf("s%04d", i-1)}
		}
		list = append(list, s)
	}
	return map[string]any{"name": "bench", "max_parallel": steps, "steps": list}
}

// BenchmarkOverhead runs a 50-step chain and a 500-step fan-out through
// capflow and through the minimal workflow, alternating, on the same dev
// server, and reports milliseconds per step for each and their ratio.
//
// The shapes run unconfined, as the minimal workflow runs the tool, but
// for fanout500-confined: capflow's steps confined (the project's default
// policy) against the minimal workflow's unconfined ones, confinement's
// cost at throughput.
func BenchmarkOverhead(b *testing.B) {
	defer startMinimal(b)()
	tool := filepath.Join(h.project, "tools/noop/run.sh")
	for _, shape := range []struct {
		name            string
		steps           int
		chain, confined bool
	}{{"chain50", 50, true, false}, {"fanout500", 500, false, false}, {"fanout500-confined", 500, false, true}} {
		b.Run(shape.name, func(b *testing.B) {
			if !shape.confined {
				defer unconfined(b)()
			}
			sideBySide(b, tool, shape.steps, shape.chain, capflowPlan(shape.steps, shape.chain), "")
		})
	}
}

// sideBySide runs the minimal workflow (of the command tool, or of the
// in-process no-op when tool is "") and a capflow plan of the same shape,
// alternating, b.N pairs, and reports milliseconds per step for each, the
// ratio of totals and the median of the per-pair ratios. path, when set,
// is the execution every capflow step must report.
func sideBySide(b *testing.B, tool string, steps int, chain bool, plan map[string]any, path string) {
	var tMin, tCap time.Duration
	var ratios []float64
	for i := 0; i < b.N; i++ {
		m0, c0 := tMin, tCap
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		start := time.Now()
		if err := runMinimal(tool, steps, !chain); err != nil {
			b.Fatalf("minimal: %v", err)
		}
		tMin += time.Since(start)
		start = time.Now()
		run, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "capflow"}, "PlanWorkflow", map[string]any{"plan": plan})
		var res struct {
			Status  string `json:"status"`
			Message string `json:"message"`
			Steps   []struct {
				Execution string `json:"execution"`
			} `json:"steps"`
		}
		if err != nil || run.Get(ctx, &res) != nil || res.Status != "passed" {
			b.Fatalf("capflow: %v %s", err, res.Message)
		}
		tCap += time.Since(start)
		cancel()
		for _, s := range res.Steps {
			if path != "" && s.Execution != path {
				b.Fatalf("a step ran %q, not %s", s.Execution, path)
			}
		}
		ratios = append(ratios, float64(tCap-c0)/float64(tMin-m0))
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N*steps) }
	b.ReportMetric(per(tMin), "minimal-ms/step")
	b.ReportMetric(per(tCap), "capflow-ms/step")
	b.ReportMetric(float64(tCap)/float64(tMin), "capflow/minimal")
	// The median of per-pair ratios: each pair ran back to back, so it
	// resists the drift of a shared machine better than totals.
	sort.Float64s(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
}

// startMinimal starts the baseline's worker; the returned func stops it.
// Its client logs warnings only, as capflow's worker does at info: the
// SDK's default logger writes a line per activity, a cost the leanest
// workflow does not pay; and like capflow's worker on loopback, it sends
// its requests uncompressed.
func startMinimal(b *testing.B) func() {
	c, err := client.Dial(client.Options{HostPort: h.address, Namespace: "default",
		Logger:            log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}}})
	if err != nil {
		b.Fatal(err)
	}
	w := worker.New(c, minimalQueue, worker.Options{})
	w.RegisterWorkflow(minimalWorkflow)
	w.RegisterWorkflow(recordedWorkflow)
	w.RegisterActivity(minimalNoop)
	w.RegisterActivity(minimalInProcess)
	w.RegisterActivity(minimalTrue)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	return func() { w.Stop(); c.Close() }
}

// BenchmarkLocal compares capflow's local path with the minimal workflow
// of regular activities, side by side on one dev server: a 50-step chain
// of a local builtin (text.render as a local activity) against the in-process no-op, a
// 50-step chain of a local command tool against the same command tool,
// and a 500-step fan-out of the local builtin against the in-process
// no-op. Targets (docs/performance.md): chains <= 0.1x, fan-out <= 1.0x.
func BenchmarkLocal(b *testing.B) {
	defer startMinimal(b)()
	tool := filepath.Join(h.project, "tools/noop-local/run.sh")
	render := map[string]any{"template": "ok"}
	for _, shape := range []struct {
		name       string
		capability string
		with       map[string]any
		minimal    string // the baseline's tool ("" = in-process)
		steps      int
		chain      bool
	}{
		{"builtin-chain50", "test.render_local", render, "", 50, true},
		{"command-chain50", "test.noop_local", nil, tool, 50, true},
		{"builtin-fanout500", "test.render_local", render, "", 500, false},
	} {
		b.Run(shape.name, func(b *testing.B) {
			sideBySide(b, shape.minimal, shape.steps, shape.chain, capflowPlanOf(shape.capability, shape.with, shape.steps, shape.chain), "local")
		})
	}
}

// BenchmarkScaleForEach runs a 10,000-item for_each (a builtin per item)
// on the dev server and reports the time per item and the largest history
// (docs/plans.md: no history past 10,240 events).
func BenchmarkScaleForEach(b *testing.B) {
	const n = 10000
	p := h.writePlan(&testing.T{}, "scale-bench", forEachPlan("scale-bench", n, 0))
	t := &testing.T{}
	for i := 0; i < b.N; i++ {
		start := time.Now()
		code, r := h.run(t, p)
		took := time.Since(start)
		if code != 0 || r.Status != "passed" {
			b.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
		}
		most := historyLength(t, r.WorkflowID)
		for k := 1; k <= (n+499)/500; k++ {
			most = max(most, historyLength(t, fmt.Sprintf("%s.fast.items-%d", r.WorkflowID, k)))
		}
		b.ReportMetric(float64(took.Milliseconds())/n, "ms/item")
		b.ReportMetric(float64(most), "max-history-events")
		b.ReportMetric(float64(workerPeakKB())/1024, "worker-peak-MB")
	}
}

// workerPeakKB is the newest worker's peak resident memory (VmHWM).
func workerPeakKB() int { return workerStatusKB("VmHWM:") }

// BenchmarkScalePlan runs a plan of 20,000 steps (a builtin each) on the
// dev server and reports the time per step, the segments it ran in, and
// the largest of their histories (docs/performance.md).
func BenchmarkScalePlan(b *testing.B) {
	const n = 20000
	file := h.writePlan(&testing.T{}, "scale-plan", largePlan(n))
	for i := 0; i < b.N; i++ {
		start := time.Now()
		code, env, stderr := h.capflow(&testing.T{}, "run", file)
		took := time.Since(start)
		var r struct {
			runResult
			Segments int `json:"segments"`
		}
		raw, _ := json.Marshal(env.Data)
		_ = json.Unmarshal(raw, &r)
		if code != 0 || r.Status != "passed" {
			b.Fatalf("exit %d %s: %s\n%s", code, r.Status, r.Message, stderr)
		}
		lengths, sizes := chainHistories(b, r.WorkflowID, r.RunID)
		b.ReportMetric(float64(took.Milliseconds())/n, "ms/step")
		b.ReportMetric(float64(r.Segments), "segments")
		b.ReportMetric(float64(slices.Max(lengths)), "max-history-events")
		b.ReportMetric(float64(slices.Max(sizes))/(1<<20), "max-history-MB")
		b.ReportMetric(float64(len(raw))/1024, "result-KB")
		b.ReportMetric(float64(workerPeakKB())/1024, "worker-peak-MB")
	}
}

// BenchmarkLimits is the cost of a tool's limits per step (issue 42): a
// 50-step chain and a 100-step fan-out of a tool whose limit is never
// reached (concurrency 1,000) against the same builtin without one, both
// regular activities, alternating b.N pairs on one dev server; each step
// of the limited tool takes its slot and gives it back (an update and a
// signal to the limit's workflow).
func BenchmarkLimits(b *testing.B) {
	render := map[string]any{"template": "ok"}
	for _, shape := range []struct {
		name  string
		steps int
		chain bool
	}{{"chain50", 50, true}, {"fanout100", 100, false}} {
		b.Run(shape.name, func(b *testing.B) {
			var plain, limited time.Duration
			for i := 0; i < b.N; i++ {
				for _, c := range []struct {
					capability string
					into       *time.Duration
				}{{"test.render", &plain}, {"test.render_limited", &limited}} {
					start := time.Now()
					if err := runCapflow(capflowPlanOf(c.capability, render, shape.steps, shape.chain), "activity"); err != nil {
						b.Fatal(err)
					}
					*c.into += time.Since(start)
				}
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N*shape.steps) }
			b.ReportMetric(per(plain), "unlimited-ms/step")
			b.ReportMetric(per(limited), "limited-ms/step")
			b.ReportMetric(float64(limited)/float64(plain), "limited/unlimited")
		})
	}
}
