package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// consoleBrowser starts headless Chromium (Debian's, as the runtime kit
// uses it) and returns a browser context.
func consoleBrowser(t testing.TB) context.Context {
	t.Helper()
	bin := ""
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Fatal("no Chromium on PATH (make test installs Debian's chromium)")
	}
	// Its profile is removed after the browser (t.TempDir's check would race
	// Chromium's last writes).
	profile, err := os.MkdirTemp(h.tmp, "chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(profile) })
	// Its temporary files too, in a short path (a socket's is at most 108
	// bytes): each test had left an org.chromium.Chromium.* folder in /tmp.
	tmp, err := os.MkdirTemp("", "cf-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(profile), chromedp.Env("TMPDIR="+tmp), chromedp.WindowSize(1400, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancel(); cancelAlloc() })
	return ctx
}

// startConsole runs `capflow console` against the test server.
func startConsole(t testing.TB, args ...string) string {
	t.Helper()
	return startConsoleEnv(t, nil, args...)
}

// startConsoleEnv is startConsole with extra environment variables.
func startConsoleEnv(t testing.TB, env []string, args ...string) string {
	t.Helper()
	return startConsoleAt(t, h.project, env, args...)
}

// startConsoleAt is a console of the project in dir.
func startConsoleAt(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	addr := freePort()
	// Its own log: consoles of tests side by side do not share one.
	log := filepath.Join(h.tmp, "console-"+strings.NewReplacer(":", "-", ".", "-").Replace(addr)+".log")
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), append([]string{"console", "--addr", addr}, args...)...)
	cmd.Dir, cmd.Env = dir, append(h.env(), env...)
	logf, _ := os.Create(log)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; i < 100; i++ {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), "capflow console on") {
			return "http://" + addr
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(log)
	t.Fatalf("the console did not start:\n%s", b)
	return ""
}

// nodeState is the state the run page shows for a step's node.
// clickUntil is a page expression that clicks step id's node unless
// what (a selector) is on the page, and says whether it is.
func clickUntil(id, what string) string {
	return fmt.Sprintf(`document.querySelector(%q) !== null || (document.getElementById("step-%s")?.dispatchEvent(new MouseEvent("click", {bubbles: true})), false)`, what, id)
}

func nodeState(id string) string {
	return fmt.Sprintf(`(document.getElementById("step-%s") || {dataset: {}}).dataset.state || ""`, id)
}

// The console in a real browser: the runs page lists a run; its page
// draws the plan (for_each, condition, approval) as a graph whose nodes
// take their states live; approving from the page lets the run pass.
func TestConsoleApproveInBrowser(t *testing.T) {
	base := startConsole(t)
	stampTool(t, h.project)
	plan := h.writePlan(t, "console", `name: console
steps:
  - {id: first, capability: test.noop}
  - {id: stamp, capability: test.stamp, with: {text: console}, cache: true}
  - id: each
    capability: text.render
    for_each: [a, b, c]
    with: {template: "item {{.x}}", values: {x: "${item}"}}
  - {id: check, capability: test.noop, needs: [first], when: "steps.first.success"}
  - {id: ok, capability: flow.approve, needs: [each, check], with: {prompt: "Ship it?"}}
  - {id: done, capability: test.noop, needs: [ok]}
`)
	s := struct{ WorkflowID string }{startDetached(t, plan)}
	ctx := consoleBrowser(t)
	var runsText string
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`a[href="/runs/`+s.WorkflowID+`"]`), chromedp.Text("#runs", &runsText)); err != nil {
		t.Fatalf("runs page: %v", err)
	}
	if !strings.Contains(runsText, "console") {
		t.Fatalf("the runs page: %q", runsText)
	}
	states := map[string]string{}
	want := map[string]string{"first": "succeeded", "stamp": "succeeded", "each": "succeeded", "check": "succeeded", "ok": "waiting", "done": "pending"}
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/runs/"+s.WorkflowID), chromedp.WaitVisible("#graph svg")); err != nil {
		t.Fatalf("run page: %v", err)
	}
	waitStates(t, ctx, want, states)
	shot(t, ctx, "console-waiting.png")
	var counts string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelector("#step-each text.mark").textContent`, &counts)); err != nil || counts != "✓3 ✗0 of 3" {
		t.Fatalf("the for_each node's counts: %q %v", counts, err)
	}
	var items string
	if err := chromedp.Run(ctx, chromedp.Click(`#step-each`), chromedp.WaitVisible(`#step table`), chromedp.Text(`#step table`, &items)); err != nil || !strings.Contains(items, "each[2]") {
		t.Fatalf("the for_each step's items: %q %v", items, err)
	}
	// A waiting run says what it waits for; only the controls that apply
	// are enabled; what is typed survives the live updates (5 s of them).
	var badge, message string
	var resumeOff, pauseOff bool
	if err := chromedp.Run(ctx, chromedp.Text("#status", &badge), chromedp.Text("#message", &message),
		chromedp.Evaluate(`document.getElementById("resume").disabled`, &resumeOff), chromedp.Evaluate(`document.getElementById("pause").disabled`, &pauseOff)); err != nil ||
		badge != "waiting" || message != "ok waits for approval: Ship it?" || !resumeOff || pauseOff {
		t.Fatalf("the waiting run's headline %q %q, resume disabled %v, pause disabled %v (%v)", badge, message, resumeOff, pauseOff, err)
	}
	var typed string
	if err := chromedp.Run(ctx, chromedp.Click(`#step-ok`), chromedp.WaitVisible(`button[data-action="approve"]`),
		chromedp.SendKeys(`#step textarea`, "looks good"), chromedp.Sleep(5*time.Second), chromedp.Value(`#step textarea`, &typed)); err != nil || typed != "looks good" {
		t.Fatalf("the comment after 5 s of live updates: %q %v", typed, err)
	}
	if err := chromedp.Run(ctx, chromedp.Click(`button[data-action="approve"]`)); err != nil {
		t.Fatalf("approve: %v", err)
	}
	waitStates(t, ctx, map[string]string{"ok": "succeeded", "done": "succeeded"}, states)
	var status string
	if err := chromedp.Run(ctx, chromedp.Poll(`document.getElementById("status").textContent === "passed"`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Text("#status", &status)); err != nil {
		t.Fatalf("the run did not pass on the page: %v", err)
	}
	var ended []bool
	if err := chromedp.Run(ctx, chromedp.Evaluate(`["pause", "resume", "cancel", "rerun"].map((b) => document.getElementById(b).disabled)`, &ended)); err != nil ||
		fmt.Sprint(ended) != "[true true true false]" {
		t.Fatalf("an ended run's controls disabled (pause, resume, cancel, rerun): %v %v", ended, err)
	}
	var report string
	if err := chromedp.Run(ctx, chromedp.WaitVisible(`#report table`), chromedp.Text(`#report`, &report)); err != nil || !strings.Contains(report, "approved by console") {
		t.Fatalf("the rendered report: %v\n%.500s", err, report)
	}
	shot(t, ctx, "console-passed.png")
	var res runResult
	_, e, _ := h.capflow(t, "status", s.WorkflowID)
	data(t, e, &res)
	if d := res.step(t, "ok").Decisions; len(d) != 1 || d[0].Action != "approve" || d[0].By != "console" || d[0].Comment != "looks good" {
		t.Fatalf("the decision: %+v", d)
	}
	// The inputs the stamp step's tool received.
	if resp, err := http.Get(base + "/api/runs/" + s.WorkflowID + "/steps/stamp/inputs"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stamp's inputs: %v %v", err, resp)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != `{"text":"console"}` {
			t.Fatalf("stamp's inputs: %s", body)
		}
	}
	// The file the stamp step's output names, from the console.
	st := res.step(t, "stamp")
	if len(st.Artifacts) != 1 {
		t.Fatalf("stamp's artifacts: %+v", st.Artifacts)
	}
	resp, err := http.Get(base + "/api/runs/" + s.WorkflowID + "/artifacts/" + st.Artifacts[0].SHA256)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tok, _ := st.Envelope.Data.(map[string]any)["token"].(string)
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != tok || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("artifact: %d %q (token %q) %s", resp.StatusCode, body, tok, resp.Header.Get("Content-Type"))
	}
	if resp, err := http.Get(base + "/api/runs/" + s.WorkflowID + "/artifacts/" + strings.Repeat("0", 64)); err != nil || resp.StatusCode != 404 {
		t.Fatalf("an artifact the run does not name: %v %v", err, resp)
	}
}

// waitStates polls the run page until every step's node shows its state.
func waitStates(t *testing.T, ctx context.Context, want, got map[string]string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for id, w := range want {
			var st string
			if err := chromedp.Run(ctx, chromedp.Evaluate(nodeState(id), &st)); err != nil {
				t.Fatal(err)
			}
			got[id] = st
			ok = ok && st == w
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node states %v, want %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// inPage runs actions in the page for at most a minute; when they fail, the
// test says what the page showed then (the browser's own time is longer, so
// it can still be asked).
func inPage(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	// The browser starts on ctx: one started on the stage's context would
	// close with it.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("%s: the browser: %v", what, err)
	}
	step, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := chromedp.Run(step, actions...)
	if err == nil {
		return
	}
	var page string
	_ = chromedp.Run(ctx, chromedp.Evaluate(`["#status", "#message", "#what-next", "#step", ".notice"].map((q) => q + ": " + ((document.querySelector(q) || {}).innerText || "").slice(0, 600)).join("\n")`, &page))
	t.Fatalf("%s: %v\nthe page showed:\n%s", what, err, page)
}

// shot keeps a screenshot of the page in the test's folder (and in docs/
// with CAPFLOW_SCREENSHOTS=1).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shotOf(t, ctx, name, chromedp.FullScreenshot)
}

// shotView keeps a screenshot of what the window shows (a large run's
// page is many screens long).
func shotView(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shotOf(t, ctx, name, func(png *[]byte, _ int) chromedp.EmulateAction { return chromedp.CaptureScreenshot(png) })
}

func shotOf(t *testing.T, ctx context.Context, name string, take func(*[]byte, int) chromedp.EmulateAction) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, take(&png, 100)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.tmp, "screenshots")
	if os.Getenv("CAPFLOW_SCREENSHOTS") == "1" {
		dir = filepath.Join(h.repo, "docs", "images")
	}
	_ = os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A console open to the network without a token is refused (exit 2,
// CONFIG_ERROR), by the CLI and by the worker.
func TestConsoleRefusesAnOpenAddress(t *testing.T) {
	code, e, _ := h.capflow(t, "console", "--addr", "0.0.0.0:0")
	if code != 2 || e.Error == nil || e.Error.Code != "CONFIG_ERROR" || !strings.Contains(e.Message, "--token") {
		t.Fatalf("capflow console on 0.0.0.0: exit %d %s", code, e.Message)
	}
	cmd := exec.Command(filepath.Join(h.bin, "capflow-worker"), "--project", h.project, "--console-addr", "0.0.0.0:0")
	cmd.Env = h.env()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "is not local") {
		t.Fatalf("capflow-worker --console-addr 0.0.0.0: %v\n%s", err, out)
	}
}

// An ended run's graph and states come from its report.json when the
// console's host has it (a query of an ended run replays its history), and
// from the run itself when it does not: the same answer.
func TestConsoleEndedRunFromReport(t *testing.T) {
	plan := h.writePlan(t, "console-ended", `name: console-ended
failure_policy: continue_all
steps:
  - {id: a, capability: test.noop}
  - {id: b, capability: test.soft_fail, needs: [a]}
  - {id: c, capability: test.noop, needs: [b]}
  - {id: d, capability: test.render, needs: [a], with: {template: "x", values: {ok: "${steps.a.success}"}}}
`)
	code, r := h.run(t, plan)
	if code == 0 || r.Status != "failed" {
		t.Fatalf("exit %d, status %s: %s", code, r.Status, r.Message)
	}
	get := func(base, path string, v any) {
		t.Helper()
		resp, err := http.Get(base + "/api/runs/" + r.WorkflowID + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(body, v) != nil {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	want := []string{"succeeded", "failed", "skipped", "succeeded"}
	var states []string
	var g struct {
		Steps []struct {
			ID   string   `json:"id"`
			Data []string `json:"data"`
		} `json:"steps"`
	}
	get(startConsole(t), "/states", &states)
	if !slices.Equal(states, want) {
		t.Fatalf("states from the report: %v, want %v", states, want)
	}
	// The report is what the console read: altered, the console says so.
	file := r.Report.JSON
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	steps := doc["result"].(map[string]any)["steps"].([]any)
	if d := steps[3].(map[string]any); d["id"] == "d" {
		d["status"] = "cancelled"
	}
	altered, _ := json.Marshal(doc)
	if err := os.WriteFile(file, altered, 0o644); err != nil {
		t.Fatal(err)
	}
	get(startConsole(t), "/states", &states)
	if states[3] != "cancelled" {
		t.Fatalf("states with an altered report: %v", states)
	}
	// Without the report, the run answers (replayed by a worker).
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	base := startConsole(t)
	get(base, "/states", &states)
	get(base, "/graph", &g)
	if !slices.Equal(states, want) || len(g.Steps) != 4 || g.Steps[3].ID != "d" || !slices.Equal(g.Steps[3].Data, []string{"a"}) {
		t.Fatalf("states from the run: %v, graph %+v", states, g)
	}
}
