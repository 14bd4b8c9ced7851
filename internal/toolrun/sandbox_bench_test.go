package toolrun

import (
	"context"
	"testing"
)

// BenchmarkSandbox is the cost of confinement (MeasureSandbox):
// docs/performance.md reports it.
func BenchmarkSandbox(b *testing.B) {
	c, err := MeasureSandbox(context.Background(), ".", b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(c.UnconfinedMS, "ms-unconfined")
	b.ReportMetric(c.ConfinedMS, "ms-confined")
	b.ReportMetric(c.OverheadMS, "ms-overhead")
	b.ReportMetric(c.BwrapFloorMS, "ms-bwrap-floor")
	b.ReportMetric(c.FloorMS, "ms-"+c.Way+"-floor")
}
