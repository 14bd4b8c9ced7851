package runtimekit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"golang.org/x/net/netutil"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/yamldoc"
)

// A browser scenario (docs/runtime.md) is YAML: steps of goto, click,
// fill, wait_for, expect_text, expect_url and screenshot, run in real
// headless Chromium through the DevTools protocol (chromedp).

// Action is one scenario step.
type Action struct {
	Line   int
	Kind   string
	Target string // a path, a selector or a screenshot name
	Text   string // fill and expect_text
}

var actionKinds = []string{"goto", "click", "fill", "wait_for", "expect_text", "expect_url", "screenshot"}

var screenshotName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ParseScenario reads a scenario file; every problem is reported with its
// line, all at once.
func ParseScenario(file, display string) ([]Action, error) {
	doc, err := yamldoc.ParseFile(file, display)
	if err != nil {
		return nil, err
	}
	var probs caperr.Problems
	at := func(line int, field, format string, args ...any) {
		probs = append(probs, caperr.New(caperr.InvalidInput, format, args...).At(display, line, 0, field))
	}
	steps := doc.Root.Get("steps")
	if doc.Root.Kind != yamldoc.Map || steps == nil || steps.Kind != yamldoc.Seq || len(steps.Items) == 0 {
		return nil, caperr.New(caperr.InvalidInput, "a scenario is a mapping with a non-empty list of steps").At(display, doc.Root.Pos.Line, 0, "steps")
	}
	var out []Action
	for i, st := range steps.Items {
		field := fmt.Sprintf("steps[%d]", i)
		if st.Kind != yamldoc.Map || len(st.Keys) != 1 {
			at(st.Pos.Line, field, "each step is one action: %s", strings.Join(actionKinds, ", "))
			continue
		}
		k := st.Keys[0]
		a := Action{Line: k.Pos.Line, Kind: k.Name}
		switch k.Name {
		case "goto", "click", "wait_for", "expect_url", "screenshot":
			s, ok := k.Value.Value.(string)
			if k.Value.Kind != yamldoc.Scalar || !ok || s == "" {
				at(k.Pos.Line, field+"."+k.Name, "%s takes a non-empty string", k.Name)
				continue
			}
			if k.Name == "screenshot" && !screenshotName.MatchString(s) {
				at(k.Pos.Line, field+".screenshot", "screenshot name %q: letters, digits, '.', '_' or '-'", s)
				continue
			}
			a.Target = s
		case "fill", "expect_text":
			m := k.Value
			if m.Kind != yamldoc.Map || len(m.Keys) != 1 {
				at(k.Pos.Line, field+"."+k.Name, "%s takes {SELECTOR: TEXT}", k.Name)
				continue
			}
			a.Target = m.Keys[0].Name
			a.Text = fmt.Sprint(m.Keys[0].Value.Interface())
		default:
			at(k.Pos.Line, field, "unknown action %q (known: %s)", k.Name, strings.Join(actionKinds, ", "))
			continue
		}
		out = append(out, a)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return out, nil
}

// StepTimeout bounds each scenario step (a selector that never appears).
var StepTimeout = 10 * time.Second

// ChromiumBinaries are looked up on PATH, in order.
var ChromiumBinaries = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

type stepResult struct {
	Index   int    `json:"index"`
	Line    int    `json:"line"`
	Action  string `json:"action"`
	Target  string `json:"target"`
	Status  string `json:"status"` // passed, failed, skipped
	Message string `json:"message,omitempty"`
}

func browserRun(ctx context.Context, raw map[string]any, env *builtin.Env) (any, error) {
	var in struct {
		BaseURL  string `json:"base_url"`
		Scenario string `json:"scenario"`
		Visual   bool   `json:"visual"`
		Trace    bool   `json:"trace"`
	}
	if err := decode(raw, &in); err != nil {
		return nil, err
	}
	// http and https only: a file:// base would have the browser, which
	// runs as the worker, read the worker's files (every other page goes
	// through the run's egress proxy).
	if u, err := url.Parse(in.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, caperr.New(caperr.InvalidInput, "base_url %q: an http:// or https:// address", in.BaseURL)
	}
	file, err := inside(env, "scenario", in.Scenario)
	if err != nil {
		return nil, err
	}
	actions, err := ParseScenario(file, in.Scenario)
	if err != nil {
		return nil, err
	}
	bin := ""
	for _, b := range ChromiumBinaries {
		if p, err := exec.LookPath(b); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		return nil, caperr.New(caperr.DependencyUnavailable, "no Chromium on PATH (%s): apt-get install chromium", strings.Join(ChromiumBinaries, ", "))
	}
	dir := filepath.Join(env.Workdir, "artifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "artifacts folder")
	}
	// In the step's folder: a worker killed while the browser ran leaves
	// it with the run, not in the machine's /tmp.
	profile, err := os.MkdirTemp(env.Workdir, ".browser-profile-")
	if err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "browser profile")
	}
	defer removeProfile(profile)
	// Chromium's temporary files in a folder of the step's own, removed
	// with the browser: its singleton's socket folder, which it leaves
	// behind, had stayed in the machine's /tmp after every run. Not in the
	// profile: a socket's path is at most 108 bytes, and the step's folder
	// is deep.
	tmp, err := os.MkdirTemp("", "capflow-browser-")
	if err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "browser temporary folder")
	}
	defer removeProfile(tmp)
	proxy, closeProxy, err := serveOutbound(env)
	if err != nil {
		return nil, caperr.Wrap(caperr.StartupError, err, "the browser's egress proxy")
	}
	defer closeProxy()
	// Every request of the browser, loopback ones included (<-loopback>),
	// goes through the run's egress proxy: it reaches the run's own
	// servers and public addresses, nothing else of this machine.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.ProxyServer("http://"+proxy), chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.UserDataDir(profile), chromedp.ModifyCmdFunc(cleanBrowserEnv(tmp)), chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-first-run", true), chromedp.Flag("disable-sync", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	var traceFile *os.File
	var ctxOpts []chromedp.ContextOption
	if in.Trace {
		if traceFile, err = os.Create(filepath.Join(dir, "protocol.log")); err != nil {
			return nil, caperr.Wrap(caperr.ObservabilityError, err, "protocol log")
		}
		defer traceFile.Close()
		var mu sync.Mutex
		ctxOpts = append(ctxOpts, chromedp.WithDebugf(func(f string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(traceFile, f+"\n", a...)
		}))
	}
	bctx, cancelBrowser := chromedp.NewContext(actx, ctxOpts...)
	defer cancelBrowser()

	var mu sync.Mutex
	console := []map[string]any{}
	failed := []map[string]any{}
	urls := map[network.RequestID]string{}
	chromedp.ListenTarget(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *cdpruntime.EventConsoleAPICalled:
			var parts []string
			for _, a := range e.Args {
				if a.Value != nil {
					var v any
					if json.Unmarshal(a.Value, &v) == nil {
						parts = append(parts, fmt.Sprint(v))
						continue
					}
				}
				parts = append(parts, a.Description)
			}
			console = append(console, map[string]any{"type": string(e.Type), "text": strings.Join(parts, " ")})
		case *cdpruntime.EventExceptionThrown:
			console = append(console, map[string]any{"type": "exception", "text": e.ExceptionDetails.Text + " " + describe(e.ExceptionDetails)})
		case *network.EventRequestWillBeSent:
			urls[e.RequestID] = e.Request.URL
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				failed = append(failed, map[string]any{"url": e.Response.URL, "status": e.Response.Status})
			}
		case *network.EventLoadingFailed:
			failed = append(failed, map[string]any{"url": urls[e.RequestID], "error": e.ErrorText})
		}
	})
	// No download lands anywhere (Chromium's default is the worker's
	// ~/Downloads, unbounded).
	if err := chromedp.Run(bctx, network.Enable(), cdpruntime.Enable(), cdpbrowser.SetDownloadBehavior(cdpbrowser.SetDownloadBehaviorBehaviorDeny)); err != nil {
		return nil, caperr.New(caperr.StartupError, "Chromium did not start: %v", err)
	}
	results := make([]stepResult, len(actions))
	var shots []string
	passed, failedN := 0, 0
	stopAt := -1
	for i, a := range actions {
		results[i] = stepResult{Index: i, Line: a.Line, Action: a.Kind, Target: a.Target, Status: "skipped"}
		if stopAt >= 0 {
			continue
		}
		msg, err := runAction(bctx, in.BaseURL, dir, a, &shots)
		if err == nil && in.Visual {
			_, err = runAction(bctx, in.BaseURL, dir, Action{Kind: "screenshot", Target: fmt.Sprintf("step-%02d", i)}, &shots)
		}
		if err != nil {
			results[i].Status, results[i].Message = "failed", err.Error()
			failedN++
			stopAt = i
			env.Feedback.Error("scenario", fmt.Sprintf("step %d (%s %s, line %d) failed: %v", i, a.Kind, a.Target, a.Line, err), "")
			continue
		}
		results[i].Status, results[i].Message = "passed", msg
		passed++
	}
	// Let late console messages and responses arrive before writing them.
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	consolePath, networkPath := filepath.Join(dir, "console.json"), filepath.Join(dir, "network.json")
	cb, _ := json.MarshalIndent(console, "", "  ")
	nb, _ := json.MarshalIndent(failed, "", "  ")
	nConsole, nFailed := len(console), len(failed)
	mu.Unlock()
	if err := os.WriteFile(consolePath, cb, 0o644); err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "console.json")
	}
	if err := os.WriteFile(networkPath, nb, 0o644); err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "network.json")
	}
	env.Feedback.Info("scenario", fmt.Sprintf("%d passed, %d failed, %d skipped; %d screenshot(s), %d console message(s), %d failed request(s) in %s",
		passed, failedN, len(actions)-passed-failedN, len(shots), nConsole, nFailed, dir))
	data := map[string]any{
		"summary":      map[string]int{"passed": passed, "failed": failedN, "skipped": len(actions) - passed - failedN},
		"artifact_dir": dir, "console_path": consolePath, "network_path": networkPath, "steps": results, "screenshots": shots,
	}
	if failedN > 0 {
		r := results[stopAt]
		return data, caperr.New(caperr.TestFailure, "scenario %s: step %d (%s %s, line %d) failed: %s", in.Scenario, r.Index, r.Action, r.Target, r.Line, r.Message)
	}
	return data, nil
}

func describe(d *cdpruntime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Exception.Description
	}
	return ""
}

// runAction runs one scenario step within StepTimeout.
func runAction(bctx context.Context, baseURL, dir string, a Action, shots *[]string) (string, error) {
	ctx, cancel := context.WithTimeout(bctx, StepTimeout)
	defer cancel()
	var err error
	msg := ""
	switch a.Kind {
	case "goto":
		target := strings.TrimRight(baseURL, "/") + "/" + strings.TrimLeft(a.Target, "/")
		if u, perr := url.Parse(target); perr != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return "", fmt.Errorf("goto %q: not an http(s) address under base_url", a.Target)
		}
		err = chromedp.Run(ctx, chromedp.Navigate(target))
	case "click":
		err = chromedp.Run(ctx, chromedp.WaitVisible(a.Target, chromedp.ByQuery), chromedp.Click(a.Target, chromedp.ByQuery))
	case "fill":
		err = chromedp.Run(ctx, chromedp.WaitVisible(a.Target, chromedp.ByQuery), chromedp.SendKeys(a.Target, a.Text, chromedp.ByQuery))
	case "wait_for":
		err = chromedp.Run(ctx, chromedp.WaitVisible(a.Target, chromedp.ByQuery))
	case "expect_text":
		var got string
		if err = chromedp.Run(ctx, chromedp.WaitVisible(a.Target, chromedp.ByQuery), chromedp.Text(a.Target, &got, chromedp.ByQuery)); err == nil {
			if !strings.Contains(got, a.Text) {
				return "", fmt.Errorf("%s holds %q, expected %q", a.Target, strings.TrimSpace(got), a.Text)
			}
			msg = fmt.Sprintf("%s holds %q", a.Target, strings.TrimSpace(got))
		}
	case "expect_url":
		var loc string
		if err = chromedp.Run(ctx, chromedp.Location(&loc)); err == nil {
			if !strings.HasSuffix(strings.SplitN(loc, "?", 2)[0], a.Target) {
				return "", fmt.Errorf("the page is %s, expected %s", loc, a.Target)
			}
			msg = loc
		}
	case "screenshot":
		var buf []byte
		if err = chromedp.Run(ctx, chromedp.FullScreenshot(&buf, 90)); err == nil {
			p := filepath.Join(dir, a.Target+".png")
			if err = os.WriteFile(p, buf, 0o644); err == nil {
				*shots = append(*shots, p)
				msg = p
			}
		}
	}
	if err != nil && ctx.Err() != nil && bctx.Err() == nil {
		return "", fmt.Errorf("nothing matched within %s (%v)", StepTimeout, err)
	}
	return msg, err
}

// serveOutbound serves the run's egress proxy on a loopback port of the
// worker's for a browser: its address, and what ends it with its tunnels.
func serveOutbound(env *builtin.Env) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	px := builtin.Outbound(env.Rules(), filepath.Base(env.RunDir)+"/browser", func(err error) {
		env.Feedback.Warn("network", "capflow refused the browser a connection: "+err.Error())
	})
	srv := &http.Server{ReadHeaderTimeout: 30 * time.Second, IdleTimeout: time.Minute, Handler: px}
	go func() { _ = srv.Serve(netutil.LimitListener(l, 256)) }()
	return l.Addr().String(), func() { _ = srv.Close(); _ = px.Close() }, nil
}

// removeProfile removes the browser's profile once the browser is gone.
// Chromium's helpers (its crash handler) may go on writing there, and
// make it again, for a moment after the browser exited (a loaded CI
// machine left one in the step's folder): it is removed until it stays
// gone, for up to 3 s.
func removeProfile(dir string) {
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if os.RemoveAll(dir) != nil {
			continue
		}
		time.Sleep(100 * time.Millisecond)
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
}
