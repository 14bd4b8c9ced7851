package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BenchmarkConsoleLargeRun opens the run page of a 2,500-step plan (a
// fan-out of text.render between a first and a last step) in headless
// Chromium and reports how long until its graph is painted with the run's
// states: cold (the console's first look: a worker replays the ended run's
// history to answer the graph query) and warm (docs/console.md).
func BenchmarkConsoleLargeRun(b *testing.B) {
	var src strings.Builder
	src.WriteString("name: console-large\nmax_parallel: 64\npolicy: {limits: {max_parallel: 64}}\nsteps:\n  - {id: first, capability: text.render, with: {template: go}}\n")
	for i := 0; i < 2498; i++ {
		fmt.Fprintf(&src, "  - {id: s%04d, capability: text.render, needs: [first], with: {template: \"n%d\"}}\n", i, i)
	}
	src.WriteString("  - id: last\n    capability: text.render\n    needs: [")
	for i := 0; i < 2498; i++ {
		if i > 0 {
			src.WriteString(", ")
		}
		fmt.Fprintf(&src, "s%04d", i)
	}
	src.WriteString("]\n    with: {template: done}\n")
	p := filepath.Join(h.project, "e2e-plans", "console-large.yaml")
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(src.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	code, r := h.run(t, p)
	if code != 0 || r.Status != "passed" {
		b.Fatalf("exit %d %s: %s", code, r.Status, r.Message)
	}
	base := startConsole(b)
	for i := 0; i < b.N; i++ {
		ctx := consoleBrowser(b)
		// The browser starts before the clock does: the page is measured.
		if err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		// A fresh console page each time; the layout is cached after the
		// first (a run's plan does not change): the first is the cold load.
		if err := chromedp.Run(ctx, chromedp.Navigate(base+"/runs/"+r.WorkflowID),
			chromedp.Poll(`(document.getElementById("step-group-1") || {dataset: {}}).dataset.state === "succeeded" && (document.getElementById("step-last") || {dataset: {}}).dataset.state === "succeeded"`, nil,
				chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second))); err != nil {
			var seen string
			_ = chromedp.Run(ctx, chromedp.Evaluate(`[document.getElementById("status").textContent, document.getElementById("notice").textContent, document.querySelector("#graph").textContent.slice(0, 300), [...document.querySelectorAll("#graph g.node")].slice(0, 5).map((g) => g.id + "=" + g.dataset.state).join(" ")].join(" | ")`, &seen))
			b.Fatalf("the page did not paint the run: %v\n%s", err, seen)
		}
		took := time.Since(start)
		if i == 0 {
			b.ReportMetric(float64(took.Milliseconds()), "cold-ms")
		}
		b.ReportMetric(float64(took.Milliseconds()), "page-ms")
	}
}
