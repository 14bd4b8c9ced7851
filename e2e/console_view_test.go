package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// fitsJS is true when the drawn graph lies inside its panel (fitted).
const fitsJS = `(() => {
  const box = document.getElementById("graph").getBoundingClientRect();
  const g = document.querySelector("#graph svg g.graph").getBoundingClientRect();
  return g.width > 0 && g.left >= box.left - 1 && g.right <= box.right + 1 && g.top >= box.top - 1 && g.bottom <= box.bottom + 1;
})()`

// overlapsJS lists the marks that cover another text of the graph,
// measured at 1:1 (far out, a browser draws text at its smallest size).
const overlapsJS = `(() => {
  const svg = document.querySelector("#graph svg"), was = svg.getAttribute("viewBox"), box = svg.getBoundingClientRect();
  svg.setAttribute("viewBox", [svg.viewBox.baseVal.x, svg.viewBox.baseVal.y, box.width, box.height].join(" "));
  const texts = [...document.querySelectorAll("#graph g.node text")].map((t) => [t, t.getBBox()]).filter(([, r]) => r.width > 0);
  svg.setAttribute("viewBox", was);
  const hit = (a, b) => a.x < b.x + b.width - 0.5 && b.x < a.x + a.width - 0.5 && a.y < b.y + b.height - 0.5 && b.y < a.y + a.height - 0.5;
  const out = [];
  for (const [m, r] of texts) {
    if (!m.classList.contains("mark") || !m.textContent.trim()) continue;
    for (const [o, q] of texts) if (o !== m && o.textContent.trim() && hit(r, q)) out.push(m.parentNode.id + " over " + o.parentNode.id + ":" + o.textContent);
  }
  return out.slice(0, 5);
})()`

// A run of 300 steps and more opens fitted to its panel: its fan-out is
// one node that opens on a click, zoom and fit work, no state mark covers
// a name; a running step's stderr shows live in the step panel; the
// timeline draws every started step with its failed attempts.
func TestConsoleLargeRunInBrowser(t *testing.T) {
	var src strings.Builder
	src.WriteString("name: console-large\nsteps:\n  - {id: first, capability: text.render, with: {template: go}}\n")
	var fan []string
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&src, "  - {id: s%03d, capability: text.render, needs: [first], with: {template: \"n%d\"}}\n", i, i)
		fan = append(fan, fmt.Sprintf("s%03d", i))
	}
	src.WriteString("  - {id: flaky, capability: test.flaky_local, needs: [first]}\n")
	src.WriteString("  - {id: slow, capability: test.slow, needs: [flaky], with: {seconds: 6}}\n")
	fmt.Fprintf(&src, "  - {id: last, capability: text.render, needs: [%s, slow], with: {template: done}}\n", strings.Join(fan, ", "))
	id := startDetached(t, h.writePlan(t, "console-large", src.String()))
	base := startConsole(t)
	ctx := consoleBrowser(t)
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/runs/"+id), chromedp.WaitVisible("#graph svg"),
		chromedp.Evaluate(`window.errs = []; window.addEventListener("error", (e) => window.errs.push(e.message)); window.addEventListener("unhandledrejection", (e) => window.errs.push(String(e.reason))); true`, nil)); err != nil {
		t.Fatalf("run page: %v", err)
	}
	// The live output tail of the running step.
	var tail string
	if err := chromedp.Run(ctx, chromedp.Poll(nodeState("slow")+` === "running"`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Click("#step-slow"),
		chromedp.Poll(`[...document.querySelectorAll("#step pre")].some((p) => /tick [2-9]/.test(p.textContent))`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate(`[...document.querySelectorAll("#step pre")].map((p) => p.textContent).join("\n")`, &tail)); err != nil {
		t.Fatalf("the running step's stderr tail: %v (%q)", err, tail)
	}
	if !strings.Contains(tail, "tick 0") || !strings.Contains(tail, "tick 2") {
		t.Fatalf("the stderr tail: %q", tail)
	}
	waitStates(t, ctx, map[string]string{"last": "succeeded", "group:1": "succeeded", "flaky": "succeeded"}, map[string]string{})
	var fits bool
	var marks, overlaps []string
	if err := chromedp.Run(ctx, chromedp.Evaluate(fitsJS, &fits), chromedp.Evaluate(overlapsJS, &overlaps),
		chromedp.Evaluate(`["group:1", "last"].map((id) => document.getElementById("step-" + id).querySelector("text.mark").textContent)`, &marks)); err != nil {
		t.Fatal(err)
	}
	if !fits || len(overlaps) > 0 || fmt.Sprint(marks) != "[✓300 ✗0 of 300 ✓]" {
		t.Fatalf("fitted %v, marks %q, marks over names %v", fits, marks, overlaps)
	}
	shotView(t, ctx, "console-large.png")
	// The keyboard's way to a step: find it, Enter opens its panel.
	var panel string
	if err := chromedp.Run(ctx, chromedp.SendKeys("#search", "s123\r"), chromedp.Text("#step h2", &panel)); err != nil || panel != "s123" {
		t.Fatalf("search and Enter: panel %q %v", panel, err)
	}
	// Zoom in, then fit again.
	var wide, zoomed, fitted float64
	if err := chromedp.Run(ctx, chromedp.Click("#zoom-fit"), chromedp.Evaluate(`document.querySelector("#graph svg").viewBox.baseVal.width`, &wide),
		chromedp.Click("#zoom-in"), chromedp.Click("#zoom-in"), chromedp.Evaluate(`document.querySelector("#graph svg").viewBox.baseVal.width`, &zoomed),
		chromedp.Click("#zoom-fit"), chromedp.Evaluate(`document.querySelector("#graph svg").viewBox.baseVal.width`, &fitted)); err != nil {
		t.Fatal(err)
	}
	if zoomed > wide*0.7 || fitted != wide {
		t.Fatalf("viewBox width: fitted %v, zoomed in twice %v, fitted again %v", wide, zoomed, fitted)
	}
	// The fan-out opens on a click, fitted again; its panel can close it.
	var nodes int
	if err := chromedp.Run(ctx, chromedp.Click(`[id="step-group:1"]`), chromedp.WaitVisible("#step-s299"),
		chromedp.Evaluate(`document.querySelectorAll("#graph g.node").length`, &nodes), chromedp.Evaluate(fitsJS, &fits)); err != nil {
		t.Fatalf("open the group: %v", err)
	}
	waitStates(t, ctx, map[string]string{"s000": "succeeded", "s299": "succeeded"}, map[string]string{})
	if err := chromedp.Run(ctx, chromedp.Evaluate(overlapsJS, &overlaps)); err != nil || nodes < 304 || !fits || len(overlaps) > 0 {
		t.Fatalf("opened: %d nodes, fitted %v, marks over names %v (%v)", nodes, fits, overlaps, err)
	}
	shotView(t, ctx, "console-large-open.png")
	// The plans page opens a group the same way.
	pctx := consoleBrowser(t)
	planFile := strings.TrimPrefix(h.writePlan(t, "console-large", src.String()), h.project+"/")
	if err := chromedp.Run(pctx, chromedp.Navigate(base+"/plans?file="+planFile), chromedp.WaitVisible(`[id="step-group:1"]`),
		chromedp.Click(`[id="step-group:1"]`), chromedp.WaitVisible("#step-s150")); err != nil {
		t.Fatalf("the plans page opens a group: %v", err)
	}
	if err := chromedp.Run(ctx, chromedp.Click(`//button[text()="Draw as one node again"]`, chromedp.BySearch), chromedp.WaitVisible(`[id="step-group:1"]`)); err != nil {
		t.Fatalf("close the group: %v", err)
	}
	// The timeline: every started step, the flaky one's two failed attempts.
	var rows int
	var flaky struct {
		Attempts string `json:"attempts"`
		Text     string `json:"text"`
	}
	if err := chromedp.Run(ctx, chromedp.Click("#tab-timeline"), chromedp.WaitVisible(`#timeline .tl-row[data-step="flaky"]`),
		chromedp.Evaluate(`document.querySelectorAll("#timeline .tl-row").length`, &rows),
		chromedp.Evaluate(`(() => { const r = document.querySelector('#timeline .tl-row[data-step="flaky"]'); return {attempts: r.dataset.attempts, text: r.textContent}; })()`, &flaky)); err != nil {
		t.Fatalf("timeline: %v", err)
	}
	if rows != 304 || flaky.Attempts != "2" || !strings.Contains(flaky.Text, "succeeded") || !strings.Contains(flaky.Text, "3 attempts") {
		t.Fatalf("timeline: %d rows, flaky %+v", rows, flaky)
	}
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelector('#timeline .tl-row[data-step="flaky"] button').click(); const tl = document.getElementById("timeline"); tl.scrollTop = document.querySelector('#timeline .tl-row[data-step="s285"]').offsetTop - tl.offsetTop; window.scrollTo(0, 0)`, nil)); err != nil {
		t.Fatal(err)
	}
	shotView(t, ctx, "console-timeline.png")
	// Searching while the graph is hidden, then back to it: fitted, and
	// nothing on the page threw.
	var errs []string
	if err := chromedp.Run(ctx, chromedp.SendKeys("#search", "s2"), chromedp.Click("#tab-graph"), chromedp.Evaluate(fitsJS, &fits), chromedp.Evaluate(`window.errs`, &errs)); err != nil || !fits || len(errs) > 0 {
		t.Fatalf("back to the graph: fitted %v, page errors %v (%v)", fits, errs, err)
	}
}

// A failed run's page says so, its step's error box carries the message;
// the plans page draws a plan with its gap marked.
func TestConsoleFailedRunAndPlansInBrowser(t *testing.T) {
	plan := h.writePlan(t, "console-failed", `name: console-failed
steps:
  - {id: a, capability: test.noop}
  - {id: broken, capability: test.medium_fail, needs: [a]}
  - {id: after, capability: test.noop, needs: [broken]}
`)
	code, r := h.run(t, plan)
	if code == 0 || r.Status != "failed" {
		t.Fatalf("exit %d %s", code, r.Status)
	}
	base := startConsole(t)
	ctx := consoleBrowser(t)
	var status, errBox, next string
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/runs/"+r.WorkflowID), chromedp.WaitVisible("#graph svg"),
		chromedp.Poll(nodeState("broken")+` === "failed"`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.WaitVisible("#what-next"), chromedp.Text("#what-next", &next),
		chromedp.Click("#step-broken"), chromedp.WaitVisible("#step .notice.error"),
		chromedp.Text("#status", &status), chromedp.Text("#step .notice.error", &errBox)); err != nil {
		t.Fatalf("failed run page: %v", err)
	}
	if status != "failed" || !strings.HasPrefix(errBox, "OBSERVABILITY_ERROR (") || len(errBox) < len("OBSERVABILITY_ERROR (MEDIUM): ")+5 {
		t.Fatalf("status %q, error box %q", status, errBox)
	}
	// What to do next, above the graph, as the CLI says it.
	if !strings.Contains(next, "broken (OBSERVABILITY_ERROR, MEDIUM): capflow rerun "+r.WorkflowID+" --from broken") {
		t.Fatalf("what next: %q", next)
	}
	shot(t, ctx, "console-failed.png")
	gapPlan := h.writePlan(t, "console-gap", `name: console-gap
steps:
  - {id: fetch, capability: test.noop}
  - {id: convert, capability: video.teleport, needs: [fetch]}
`)
	rel := strings.TrimPrefix(gapPlan, h.project+"/")
	var st string
	var gap bool
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/plans?file="+rel), chromedp.WaitVisible("#graph svg"),
		chromedp.Text("#status", &st), chromedp.Evaluate(`document.getElementById("step-convert").classList.contains("state-gap")`, &gap)); err != nil {
		t.Fatalf("plans page: %v", err)
	}
	if st != "partial-complete" || !gap {
		t.Fatalf("plans page: status %q, gap marked %v", st, gap)
	}
	shot(t, ctx, "console-plans.png")
}
