package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// BenchmarkPeers is `make bench-peers` (docs/performance.md): the same
// shapes on capflow (its regular path and its fastest), a hand-written
// Temporal workflow and Restate (its server from the npm package, the
// service in bench/peers/restate), one after another in one run, the
// order rotated each repetition; medians in milliseconds per step are
// printed with their ratios and written to bench-peers.json.
func BenchmarkPeers(b *testing.B) {
	defer startMinimal(b)()
	rs := startRestate(b)
	defer rs.stop()
	defer unconfined(b)()
	reps := 7
	if n, err := strconv.Atoi(os.Getenv("CAPFLOW_PEERS_REPS")); err == nil && n > 0 {
		reps = n
	}
	out := map[string]map[string]float64{}
	for _, sh := range peerShapes() {
		if only := os.Getenv("CAPFLOW_PEERS_SHAPES"); only != "" && !slices.Contains(strings.Split(only, ","), sh.name) {
			continue
		}
		runs := sh.runners(rs)
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range runs {
				if !yield(n) {
					return
				}
			}
		})
		times := map[string][]float64{}
		for r := -1; r < reps; r++ { // r = -1: a warm-up, not counted
			for k := range names {
				name := names[(k+max(r, 0))%len(names)]
				start := time.Now()
				if err := runs[name](); err != nil {
					b.Fatalf("%s, %s: %v", sh.name, name, err)
				}
				if r >= 0 {
					times[name] = append(times[name], float64(time.Since(start).Microseconds())/1000/float64(sh.steps))
				}
			}
		}
		out[sh.name] = map[string]float64{}
		for n, ts := range times {
			out[sh.name][n] = round2(median(ts))
		}
	}
	printPeers(b, out, reps)
	raw, _ := json.MarshalIndent(out, "", "  ")
	if err := os.WriteFile(filepath.Join(h.repo, "bench-peers.json"), append(raw, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
}

// peerShape is one shape and how each system runs it.
type peerShape struct {
	name  string
	steps int
	chain bool
	// regular and fast are capflow's capabilities (fast's execution path
	// checked); minimal is the hand-written workflow's activity ("" the
	// in-process no-op, "true" a `true` process); handler is Restate's.
	regular, fast, fastPath, minimal, handler string
	with                                      map[string]any
}

func peerShapes() []peerShape {
	render := map[string]any{"template": "ok"}
	return []peerShape{
		{name: "chain50", steps: 50, chain: true, regular: "test.render", fast: "text.render", fastPath: "inline", handler: "Chain", with: render},
		{name: "fanout500", steps: 500, regular: "test.render", fast: "text.render", fastPath: "inline", handler: "Fanout", with: render},
		{name: "chain50-shell", steps: 50, chain: true, regular: "test.true", fast: "test.true_inline", fastPath: "inline", minimal: "true", handler: "Shell"},
	}
}

func (sh peerShape) runners(rs *restatePeer) map[string]func() error {
	return map[string]func() error{
		"capflow":      func() error { return runCapflow(capflowPlanOf(sh.regular, sh.with, sh.steps, sh.chain), "activity") },
		"capflow-fast": func() error { return runCapflow(capflowPlanOf(sh.fast, sh.with, sh.steps, sh.chain), sh.fastPath) },
		"temporal":     func() error { return runMinimal(sh.minimal, sh.steps, !sh.chain) },
		"restate":      func() error { return rs.invoke(sh.handler, sh.steps) },
	}
}

// runCapflow runs a plan to its end and checks every step took path.
func runCapflow(plan map[string]any, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "capflow"}, "PlanWorkflow", map[string]any{"plan": plan})
	if err != nil {
		return err
	}
	var res struct {
		Status, Message string
		Steps           []struct{ ID, Execution string }
	}
	if err := run.Get(ctx, &res); err != nil || res.Status != "passed" {
		return fmt.Errorf("%v %s %s", err, res.Status, res.Message)
	}
	for _, s := range res.Steps {
		if s.Execution != path {
			return fmt.Errorf("step %s ran %q, not %s", s.ID, s.Execution, path)
		}
	}
	return nil
}

// runHandWritten runs one of the hand-written workflows to its end.
func runHandWritten(wf any, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: minimalQueue}, wf, args...)
	if err != nil {
		return err
	}
	return run.Get(ctx, nil)
}

func runMinimal(tool string, steps int, parallel bool) error {
	return runHandWritten(minimalWorkflow, tool, steps, parallel)
}

// runRecorded runs recordedWorkflow.
func runRecorded() error { return runHandWritten(recordedWorkflow) }

// unconfined runs command tools unconfined for the benchmark, as the peers
// run theirs (the project's policy, restored after): confinement's own cost
// is BenchmarkSandbox's.
func unconfined(b *testing.B) func() {
	p := filepath.Join(h.project, "policy.yaml")
	was, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, append(append([]byte{}, was...), "\nsandbox: off\n"...), 0o644); err != nil {
		b.Fatal(err)
	}
	return func() { _ = os.WriteFile(p, was, 0o644) }
}

func printPeers(b *testing.B, out map[string]map[string]float64, reps int) {
	var s strings.Builder
	fmt.Fprintf(&s, "\nms per step, medians of %d runs each, alternated (bench-peers.json)\n", reps)
	fmt.Fprintf(&s, "%-14s %9s %13s %9s %9s   %s\n", "shape", "capflow", "capflow-fast", "temporal", "restate", "ratios")
	for _, sh := range peerShapes() {
		m := out[sh.name]
		best := min(m["temporal"], m["restate"])
		fmt.Fprintf(&s, "%-14s %9.2f %13.2f %9.2f %9.2f   fast/best peer %.2f, regular/temporal %.2f\n", sh.name,
			m["capflow"], m["capflow-fast"], m["temporal"], m["restate"], m["capflow-fast"]/best, m["capflow"]/m["temporal"])
		b.ReportMetric(m["capflow-fast"]/best, sh.name+"-fast/best-peer")
		b.ReportMetric(m["capflow"]/m["temporal"], sh.name+"-regular/temporal")
	}
	fmt.Print(s.String())
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// restatePeer is a Restate server in a temporary folder, on loopback ports
// of its own, and the benchmark's service registered with it.
type restatePeer struct {
	dir, ingress string
	server, svc  *exec.Cmd
}

// startRestate starts the server (CAPFLOW_RESTATE_SERVER, else the npm
// package's binary under bench/peers) and the service
// (CAPFLOW_RESTATE_SERVICE, else bin/restate-bench), registers the
// service and calls each handler once (the SDK's first call compiles its
// core).
func startRestate(b *testing.B) *restatePeer {
	server := envOr("CAPFLOW_RESTATE_SERVER", filepath.Join(h.repo, "bench/peers/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server"))
	svc := envOr("CAPFLOW_RESTATE_SERVICE", filepath.Join(h.repo, "bin/restate-bench"))
	for _, f := range []string{server, svc} {
		if !fileExists(f) {
			b.Fatalf("%s is missing: run `make bench-peers` (it installs the Restate server from npm and builds the service)", f)
		}
	}
	dir, err := os.MkdirTemp("", "capflow-restate-")
	if err != nil {
		b.Fatal(err)
	}
	ports := freePorts(b, 4)
	rs := &restatePeer{dir: dir, ingress: "http://" + ports[0]}
	conf := fmt.Sprintf(restateConfig, ports[2], ports[2], ports[1], ports[1], ports[0], ports[0])
	if err := os.WriteFile(filepath.Join(dir, "restate.toml"), []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	// Its own TMPDIR, removed with dir: the server leaves two dozen
	// invoker-* folders in the system's at every start.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		b.Fatal(err)
	}
	rs.server = exec.Command(server, "--config-file", filepath.Join(dir, "restate.toml"), "--base-dir", filepath.Join(dir, "data"), "--no-logo")
	rs.server.Env = append(os.Environ(), "DO_NOT_TRACK=1", "TMPDIR="+tmp)
	rs.svc = exec.Command(svc, "-listen", ports[3])
	for _, c := range []*exec.Cmd{rs.server, rs.svc} {
		log, _ := os.Create(filepath.Join(dir, filepath.Base(c.Path)+".log"))
		c.Stdout, c.Stderr = log, log
		if err := c.Start(); err != nil {
			rs.stop()
			b.Fatal(err)
		}
	}
	if err := rs.ready("http://"+ports[1], "http://"+ports[3]); err != nil {
		logs, _ := os.ReadFile(filepath.Join(dir, "restate-server.log"))
		rs.stop()
		b.Fatalf("restate: %v\n%s", err, logs)
	}
	return rs
}

// restateConfig: fabric, admin and ingress on loopback, no telemetry, no
// web UI, quiet logs (the update check fails offline: silenced).
const restateConfig = `cluster-name = "capflow-bench"
node-name = "bench"
disable-telemetry = true
listen-mode = "tcp"
bind-ip = "127.0.0.1"
bind-address = "%s"
advertised-address = "http://%s/"
log-filter = "warn,octocrab=off"
log-disable-ansi-codes = true

[admin]
bind-address = "%s"
advertised-address = "http://%s/"
disable-web-ui = true

[ingress]
bind-address = "%s"
advertised-address = "http://%s/"
`

// ready waits for the admin API, registers the service, and warms each
// handler up.
func (rs *restatePeer) ready(admin, svc string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := http.Get(admin + "/health")
		if err == nil {
			r.Body.Close()
		}
		if err == nil && r.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the admin API never answered: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		// The service may still be starting: registration retries.
		body, code, err := post(admin+"/deployments", fmt.Sprintf(`{"uri": %q}`, svc))
		if err == nil && (code == http.StatusCreated || code == http.StatusOK) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("registering %s: %d %s %v", svc, code, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, handler := range []string{"Chain", "Shell", "Fanout"} {
		for {
			err := rs.invoke(handler, 1)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return err
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// invoke calls a handler through the ingress and waits for its answer.
func (rs *restatePeer) invoke(handler string, n int) error {
	body, code, err := post(rs.ingress+"/Bench/"+handler, strconv.Itoa(n))
	if err != nil || code != http.StatusOK || strings.TrimSpace(body) != strconv.Itoa(n) {
		return fmt.Errorf("Bench/%s(%d): %d %s %v", handler, n, code, body, err)
	}
	return nil
}

func (rs *restatePeer) stop() {
	for _, c := range []*exec.Cmd{rs.server, rs.svc} {
		if c != nil && c.Process != nil {
			_ = c.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = c.Process.Kill()
			}
		}
	}
	_ = os.RemoveAll(rs.dir)
}

func post(url, body string) (string, int, error) {
	r, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		return "", 0, err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	return string(b), r.StatusCode, nil
}

// freePorts are n loopback addresses free a moment ago.
func freePorts(b *testing.B, n int) []string {
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
