package e2e

import (
	"fmt"
	"io"
	"net/http"
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
			chromedp.Poll(`(document.getElementById("step-group:1") || {dataset: {}}).dataset.state === "succeeded" && (document.getElementById("step-last") || {dataset: {}}).dataset.state === "succeeded"`, nil,
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

// BenchmarkConsole12000 opens the page of a 12,000-step run (a fan-out of
// text.render, the fast path) while it runs and until it passed, and
// reports how long until the page first painted it, the longest task over
// 50 ms that held the page's main thread meanwhile (what a person typing
// or scrolling would wait for; 0: none), how many there were, how long a
// search for the last step took to find it, and how long the timeline
// took to draw (its first 400 rows) (docs/console.md).
func BenchmarkConsole12000(b *testing.B) {
	const n = 12000
	var src strings.Builder
	src.WriteString("name: console-12000\nsteps:\n  - {id: first, capability: text.render, with: {template: go}}\n")
	for i := 0; i < n-2; i++ {
		fmt.Fprintf(&src, "  - {id: s%05d, capability: text.render, needs: [first], with: {template: \"n%d\"}}\n", i, i)
	}
	src.WriteString("  - {id: last, capability: text.render, needs: [first], with: {template: done}}\n")
	p := filepath.Join(h.project, "e2e-plans", "console-12000.yaml")
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(src.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	base := startConsole(b)
	for i := 0; i < b.N; i++ {
		t := &testing.T{}
		id := startDetached(t, p)
		ctx := consoleBrowser(b)
		if err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var painted time.Duration
		if err := chromedp.Run(ctx, chromedp.Navigate(base+"/runs/"+id),
			chromedp.Evaluate(`window.longest = 0; window.long50 = 0; new PerformanceObserver((l) => { for (const e of l.getEntries()) { window.longest = Math.max(window.longest, e.duration); if (e.duration > 50) window.long50++; } }).observe({type: "longtask", buffered: true}); true`, nil),
			chromedp.Poll(`document.querySelectorAll("#graph g.node.step[data-state]").length > 0`, nil, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
			var seen string
			_ = chromedp.Run(ctx, chromedp.Evaluate(`[document.getElementById("status").textContent, document.getElementById("notice").textContent, document.querySelector("#graph").textContent.slice(0, 300), document.querySelectorAll("#graph g.node").length].join(" | ")`, &seen))
			var logs []byte
			if files, _ := filepath.Glob(filepath.Join(h.tmp, "console-*.log")); len(files) > 0 {
				logs, _ = os.ReadFile(files[len(files)-1])
			}
			for _, path := range []string{"", "/graph", "/states"} {
				c := http.Client{Timeout: 10 * time.Second}
				start := time.Now()
				resp, err := c.Get(base + "/api/runs/" + id + path)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					b.Logf("GET %s: %d after %s: %.200s", path, resp.StatusCode, time.Since(start), body)
				} else {
					b.Logf("GET %s: %v", path, err)
				}
			}
			b.Fatalf("first paint: %v\n%s\nconsole log:\n%.3000s", err, seen, logs)
		}
		painted = time.Since(start)
		var longest float64
		var long50 int
		var found float64
		if err := chromedp.Run(ctx,
			chromedp.Poll(`document.getElementById("status").textContent === "passed"`, nil, chromedp.WithPollingTimeout(5*time.Minute)),
			chromedp.Poll(nodeState("group:1")+` === "succeeded"`, nil, chromedp.WithPollingTimeout(time.Minute)),
			chromedp.Evaluate(`(() => { const t0 = performance.now(); const s = document.getElementById("search"); s.value = "last"; s.dispatchEvent(new Event("input")); return document.querySelector("#graph g.found") ? performance.now() - t0 : -1; })()`, &found)); err != nil {
			b.Fatalf("the run on the page: %v", err)
		}
		if found < 0 {
			var seen string
			_ = chromedp.Run(ctx, chromedp.Evaluate(`[...document.querySelectorAll("#graph g.node")].map((g) => g.id + ":" + g.getAttribute("class")).join(" ")`, &seen))
			b.Fatalf("the search did not find the last step: %.500s", seen)
		}
		api := time.Now()
		if resp, err := http.Get(base + "/api/runs/" + id + "/timeline"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.ReportMetric(float64(time.Since(api).Milliseconds()), "timeline-api-ms")
		tl := time.Now()
		if err := chromedp.Run(ctx, chromedp.Click("#tab-timeline"),
			chromedp.Poll(`document.querySelectorAll("#timeline .tl-row").length === 400`, nil, chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
			b.Fatalf("the timeline: %v", err)
		}
		b.ReportMetric(float64(time.Since(tl).Milliseconds()), "timeline-ms")
		var fetchMS float64
		_ = chromedp.Run(ctx, chromedp.Evaluate(`performance.getEntriesByType("resource").filter((e) => e.name.endsWith("/timeline")).map((e) => e.duration).pop() || -1`, &fetchMS))
		b.ReportMetric(fetchMS, "timeline-fetch-ms")
		if err := chromedp.Run(ctx, chromedp.Sleep(time.Second), chromedp.Evaluate(`window.longest`, &longest), chromedp.Evaluate(`window.long50`, &long50)); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(painted.Milliseconds()), "first-paint-ms")
		b.ReportMetric(longest, "longest-task-ms")
		b.ReportMetric(float64(long50), "tasks-over-50ms")
		b.ReportMetric(found, "search-ms")
	}
}
