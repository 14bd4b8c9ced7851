package e2e

import (
	"slices"
	"testing"
	"time"
)

// The order of bench-throughput's batches, and the ratios it reports.

// runBlocks are the systems that run one after the other in every
// repetition: each row beside the row it is measured against (ratioPairs).
var runBlocks = [][]string{{"capflow", "temporal"}, {"temporal-recorded", "capflow-fast", "temporal-empty", "capflow-eager"}, {"restate"}}

// ratioPairs are the ratios reported: a row, and the row it is measured
// against.
var ratioPairs = [][2]string{{"capflow", "temporal"}, {"capflow-fast", "temporal-empty"}, {"capflow-eager", "temporal-empty"},
	{"temporal-recorded", "temporal-empty"}, {"capflow-fast", "temporal-recorded"}, {"capflow-eager", "temporal-recorded"}}

// batchOrder is the order of the systems (indexes into names) in
// repetition r: runBlocks rotated by one each repetition and the whole
// order reversed every other one, so no system always follows the same
// other one or runs last, and the rows of a pair run one after the other
// (those of no block, CAPFLOW_THROUGHPUT_SYSTEMS's own, last).
func batchOrder(names []string, r int) []int {
	var order []int
	for j := range runBlocks {
		for _, name := range runBlocks[(j+r)%len(runBlocks)] {
			if k := slices.Index(names, name); k >= 0 {
				order = append(order, k)
			}
		}
	}
	for k := range names {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	if r%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// pairedRatios are ratioPairs' ratios: for each, the median over the
// repetitions of the two rows' runs/s in the same repetition.
func pairedRatios(seen map[string][]throughputSample) map[string]float64 {
	out := map[string]float64{}
	for _, p := range ratioPairs {
		row, ref := seen[p[0]], seen[p[1]]
		if len(row) == 0 || len(row) != len(ref) {
			continue // left out by CAPFLOW_THROUGHPUT_SYSTEMS
		}
		rs := make([]float64, len(row))
		for i := range row {
			rs[i] = row[i].runsPerS / ref[i].runsPerS
		}
		out[p[0]+"/"+p[1]] = round2(median(rs))
	}
	return out
}

// settle waits until the processes cpu reads (the servers, the workers,
// this one) together use under a tenth of a core for two windows of
// 250 ms running, or until limit: each batch starts on a machine that
// its predecessor's leftovers do not load. It returns how long it waited.
func settle(cpu []func() float64, limit time.Duration) time.Duration {
	const window = 250 * time.Millisecond
	sum := func() (t float64) {
		for _, f := range cpu {
			t += f()
		}
		return t
	}
	start, quiet, last := time.Now(), 0, sum()
	for quiet < 2 && time.Since(start) < limit {
		time.Sleep(window)
		now := sum()
		if now-last < 0.1*float64(window.Milliseconds()) {
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
	return time.Since(start)
}

// In every repetition each pair's rows run one after the other, every
// system runs once, and the first and last systems change.
func TestBatchOrderKeepsPairsTogether(t *testing.T) {
	names := slices.Concat(runBlocks...)
	firsts := map[int]bool{}
	for r := range 6 {
		order := batchOrder(names, r)
		if len(order) != len(names) || len(slices.Compact(slices.Sorted(slices.Values(order)))) != len(names) {
			t.Fatalf("repetition %d: order %v runs some system twice or not at all", r, order)
		}
		firsts[order[0]] = true
		at := func(name string) int { return slices.Index(order, slices.Index(names, name)) }
		for _, p := range ratioPairs {
			// The recorded floor's pairs within their block, the others side by side.
			d := max(at(p[0])-at(p[1]), at(p[1])-at(p[0]))
			if d > 3 || (p[0] != "temporal-recorded" && p[1] != "temporal-recorded" && d != 1) {
				t.Errorf("repetition %d: %s and %s are %d batches apart", r, p[0], p[1], d)
			}
		}
	}
	if len(firsts) < 3 {
		t.Errorf("the first batch is always one of %v", firsts)
	}
	seen := map[string][]throughputSample{"capflow-fast": {{runsPerS: 90}, {runsPerS: 40}, {runsPerS: 70}},
		"temporal-empty": {{runsPerS: 100}, {runsPerS: 50}, {runsPerS: 60}}}
	// Per repetition 0.9, 0.8, 1.17: the median 0.9, where the medians'
	// ratio (70 / 60) would say 1.17.
	if got := pairedRatios(seen)["capflow-fast/temporal-empty"]; got != 0.9 {
		t.Errorf("paired ratio %v, want 0.9", got)
	}
}
