package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// BenchmarkStore measures the artifact store and the cache (docs/cache.md):
// a 500-step fan-out whose every step writes a file its output names, on
// a worker with a shared file store (each file and output stored by
// digest) and on one without (alternating, one run); and a 50-step chain
// of cached steps run a second time (every step a hit) against its first
// run.
func BenchmarkStore(b *testing.B) {
	stampTool(b, h.project)
	store := filepath.Join(h.tmp, "bench-store")
	for _, w := range [][]string{{"CAPFLOW_TEMPORAL_TASK_QUEUE=bench-nostore"}, {"CAPFLOW_TEMPORAL_TASK_QUEUE=bench-store", "CAPFLOW_ARTIFACTS_URL=file://" + store}} {
		workerAt(b, h.project, w...)
	}
	b.Run("fanout500", func(b *testing.B) {
		plan := capflowPlanOf("test.stamp", nil, 500, false)
		var without, with time.Duration
		var ratios []float64
		for i := 0; i < b.N; i++ {
			t0 := runPlanOn(b, "bench-nostore", plan)
			t1 := runPlanOn(b, "bench-store", plan)
			without, with = without+t0, with+t1
			ratios = append(ratios, float64(t1)/float64(t0))
		}
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N*500) }
		b.ReportMetric(per(without), "no-store-ms/step")
		b.ReportMetric(per(with), "store-ms/step")
		sort.Float64s(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "store/no-store")
	})
	b.Run("chain50-cached", func(b *testing.B) {
		var first, again time.Duration
		for i := 0; i < b.N; i++ {
			// Inputs of its own per step (a chain of equal steps would hit
			// its own first step's entry).
			plan := capflowPlanOf("test.stamp", nil, 50, true)
			for j, s := range plan["steps"].([]any) {
				s.(map[string]any)["cache"] = true
				s.(map[string]any)["with"] = map[string]any{"text": fmt.Sprintf("bench %d %d %d", i, j, time.Now().UnixNano())}
			}
			first += runPlanOn(b, "bench-nostore", plan)
			again += runPlanOn(b, "bench-nostore", plan)
		}
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N*50) }
		b.ReportMetric(per(first), "first-ms/step")
		b.ReportMetric(per(again), "cached-ms/step")
		b.ReportMetric(float64(again)/float64(first), "cached/first")
	})
}

// runPlanOn runs a plan on a task queue and returns how long it took.
func runPlanOn(b *testing.B, queue string, plan map[string]any) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	run, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, "PlanWorkflow", map[string]any{"plan": plan})
	var res struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if err != nil || run.Get(ctx, &res) != nil || res.Status != "passed" {
		b.Fatalf("%s: %v %s", queue, err, res.Message)
	}
	return time.Since(start)
}
