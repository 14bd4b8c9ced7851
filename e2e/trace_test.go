package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// span is one span an OTLP/HTTP collector received.
type span struct {
	Trace, ID, Parent, Name, Service string
	Attrs                            map[string]string
	Failed                           bool
	Start, End                       time.Time
}

// collector is a local OTLP/HTTP endpoint (protobuf, /v1/traces) that
// keeps what it receives.
type collector struct {
	URL   string
	mu    sync.Mutex
	spans []span
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		raw, _ := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.add(&req)
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *collector) add(req *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := span{Trace: hex.EncodeToString(s.TraceId), ID: hex.EncodeToString(s.SpanId), Name: s.Name, Service: service,
					Attrs: map[string]string{}, Failed: s.GetStatus().GetCode() == 2,
					Start: time.Unix(0, int64(s.StartTimeUnixNano)), End: time.Unix(0, int64(s.EndTimeUnixNano))}
				if len(s.ParentSpanId) > 0 {
					sp.Parent = hex.EncodeToString(s.ParentSpanId)
				}
				for _, a := range s.Attributes {
					v := a.GetValue()
					if v.GetStringValue() != "" {
						sp.Attrs[a.Key] = v.GetStringValue()
					} else {
						sp.Attrs[a.Key] = fmt.Sprint(v.GetIntValue())
					}
				}
				c.spans = append(c.spans, sp)
			}
		}
	}
}

// wait returns the spans of trace once one named name is among them.
func (c *collector) wait(t *testing.T, trace, name string) []span {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got := c.trace(trace); byName(got, name) != nil {
			return got
		}
	}
	t.Fatalf("no span %q in trace %s within 30s; received: %s", name, trace, c.names())
	return nil
}

func (c *collector) trace(id string) []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []span
	for _, s := range c.spans {
		if s.Trace == id {
			out = append(out, s)
		}
	}
	return out
}

func (c *collector) names() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n []string
	for _, s := range c.spans {
		n = append(n, s.Trace[:8]+"/"+s.Name)
	}
	return strings.Join(n, ", ")
}

func byName(spans []span, name string) *span {
	for i := range spans {
		if spans[i].Name == name {
			return &spans[i]
		}
	}
	return nil
}

// ancestors are the names of a span's ancestors, nearest first.
func ancestors(spans []span, s span) []string {
	byID := map[string]span{}
	for _, x := range spans {
		byID[x.ID] = x
	}
	var out []string
	for p, ok := byID[s.Parent]; ok && len(out) < 50; p, ok = byID[p.Parent] {
		out = append(out, p.Name)
	}
	return out
}

// uniqueSpans fails when two spans share an ID: a span exported twice (by
// a replay, by a second worker).
func uniqueSpans(t *testing.T, spans []span) {
	t.Helper()
	seen := map[string]string{}
	for _, s := range spans {
		if other, ok := seen[s.ID]; ok {
			t.Errorf("spans %q and %q share the ID %s", other, s.Name, s.ID)
		}
		seen[s.ID] = s.Name
	}
}

// tracedProject is a copy of the test project whose capflow.yaml sends
// traces to c, with its own worker on queue.
func tracedProject(t *testing.T, c *collector, queue string) (string, []string) {
	t.Helper()
	dir := projectCopy(t)
	cfg, err := os.ReadFile(filepath.Join(dir, "capflow.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, fmt.Sprintf("\ntelemetry:\n  otlp_endpoint: %s\n", c.URL)...)
	if err := os.WriteFile(filepath.Join(dir, "capflow.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	// Spans leave a worker within 100 ms of ending (the SDK's default is
	// 5 s): a killed worker loses only what ended in its last 100 ms.
	env := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=" + queue, "OTEL_BSP_SCHEDULE_DELAY=100"}
	return dir, env
}

// A traced run is one tree in one trace, from the CLI that started it to
// every attempt of every step: capflow's run, step and attempt spans
// beneath Temporal's own, with the step's capability, tool, status, error
// code and attempts, and nothing of its inputs. The report names the trace.
func TestRunsAreTraced(t *testing.T) {
	c := startCollector(t)
	dir, env := tracedProject(t, c, "capflow-trace")
	workerAt(t, dir, env...)
	plan := filepath.Join(dir, "traced.yaml")
	_ = os.WriteFile(plan, []byte(`name: traced
failure_policy: continue_all
steps:
  - {id: first, capability: test.noop, with: {note: TRACE-MARKER-INPUT}}
  - {id: flaky, capability: test.flaky_local, needs: [first]}
  - {id: soft, capability: test.soft_fail, needs: [first], retry: {max_attempts: 1}}
  - {id: after, capability: test.noop, needs: [soft]}
`), 0o644)
	code, e, stderr := h.capflowAt(t, dir, env, "run", plan)
	var res runResult
	data(t, e, &res)
	var traceID string
	if m, ok := e.Data.(map[string]any); ok {
		traceID, _ = m["trace_id"].(string)
	}
	if code == 0 || res.Status != "failed" || len(traceID) != 32 {
		t.Fatalf("exit %d, status %s, trace %q: %s\n%s", code, res.Status, traceID, e.Message, stderr)
	}
	spans := c.wait(t, traceID, "run "+res.WorkflowID)
	uniqueSpans(t, spans)
	for _, s := range spans {
		for k, v := range s.Attrs {
			if strings.Contains(v, "TRACE-MARKER-INPUT") {
				t.Errorf("span %s carries a step's input in %s", s.Name, k)
			}
		}
	}
	start := byName(spans, "StartWorkflow:PlanWorkflow")
	if start == nil || start.Service != "capflow" || start.Parent != "" {
		t.Fatalf("the CLI's StartWorkflow span is not the trace's root: %+v", start)
	}
	run := byName(spans, "run "+res.WorkflowID)
	if got := ancestors(spans, *run); strings.Join(got, " < ") != "RunWorkflow:PlanWorkflow < StartWorkflow:PlanWorkflow" {
		t.Errorf("the run span's ancestors: %v", got)
	}
	if run.Service != "capflow-worker" || run.Attrs["capflow.status"] != "failed" || run.Attrs["capflow.plan"] != "traced" || !run.Failed {
		t.Errorf("run span: %+v", run)
	}
	checkStepSpans(t, spans, run)
	var report struct {
		Result struct {
			TraceID string `json:"trace_id"`
		} `json:"result"`
	}
	raw, _ := os.ReadFile(res.Report.JSON)
	md, _ := os.ReadFile(res.Report.Markdown)
	if json.Unmarshal(raw, &report) != nil || report.Result.TraceID != traceID || !strings.Contains(string(md), "| trace | `"+traceID+"` |") {
		t.Errorf("the report does not name trace %s: %q\n%s", traceID, report.Result.TraceID, md)
	}
}

// A run started by an untraced client, whose worker is SIGKILLed mid-step,
// is still one trace with no orphan: the run's spans take identifiers
// derived from the run, so the worker that takes over continues the same
// tree, and the report names that trace.
func TestATraceSurvivesAWorkerKill(t *testing.T) {
	t.Parallel()
	c := startCollector(t)
	dir, env := tracedProject(t, c, "capflow-trace-kill")
	first := workerAt(t, dir, env...)
	log := filepath.Join(dir, "logs", "trace-kill.log")
	_ = os.MkdirAll(filepath.Dir(log), 0o755)
	plan := filepath.Join(dir, "trace-kill.yaml")
	_ = os.WriteFile(plan, []byte(fmt.Sprintf(`name: trace-kill
steps:
  - {id: first, capability: test.noop}
  - {id: middle, capability: test.slow, heartbeat: 2s, with: {seconds: 4, log: %q}, needs: [first]}
  - {id: last, capability: test.noop, needs: [middle]}
`, log)), 0o644)
	// Started from the untraced project: no parent span in the header.
	id := startDetachedAt(t, h.project, env[:1], plan)
	// Killed once middle's tool runs and what the worker traced before it
	// was exported (OTEL_BSP_SCHEDULE_DELAY is 100 ms here: spans that
	// ended less than that before a SIGKILL are lost, docs/observability.md).
	waitLine(t, log, "attempt 1 middle")
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(c.names(), "/first") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	h.kill(first)
	workerAt(t, dir, env...)
	res := waitResult(t, id, 2*time.Minute)
	if res.Status != "passed" || len(res.TraceID) != 32 {
		t.Fatalf("after the worker was killed: %s %s, trace %q", res.Status, res.Message, res.TraceID)
	}
	spans := c.wait(t, res.TraceID, "run "+id)
	uniqueSpans(t, spans)
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.ID] = true
	}
	for _, s := range spans {
		if s.Parent != "" && !ids[s.Parent] {
			t.Errorf("span %q has a parent the trace does not hold (%s)", s.Name, s.Parent)
		}
	}
	run := byName(spans, "run "+id)
	for _, step := range []string{"first", "middle", "last"} {
		if s := byName(spans, step); s == nil || s.Parent != run.ID || s.Attrs["capflow.status"] != "succeeded" {
			t.Errorf("step %s: %+v (run span %s)", step, s, run.ID)
		}
	}
	if a := byName(spans, "middle attempt 2"); a == nil {
		t.Errorf("the attempt after the kill is not in the trace: %s", c.names())
	}
	if n := len(c.trace(res.TraceID)); n != len(spans) {
		t.Errorf("spans changed while reading: %d then %d", len(spans), n)
	}
}

// checkStepSpans checks the step and attempt spans of TestRunsAreTraced's
// plan: beneath the run span, with the steps' attributes, each attempt of
// the flaky step beneath Temporal's RunActivity and the step.
func checkStepSpans(t *testing.T, spans []span, run *span) {
	t.Helper()
	want := map[string]map[string]string{
		"first": {"capflow.status": "succeeded", "capflow.capability": "test.noop", "capflow.tool": "noop@1.0.0", "capflow.attempts": "1"},
		"flaky": {"capflow.status": "succeeded", "capflow.tool": "flaky-local@1.0.0", "capflow.attempts": "3"},
		"soft":  {"capflow.status": "failed", "capflow.error_code": "TEST_FAILURE", "capflow.attempts": "1"},
		"after": {"capflow.status": "skipped"},
	}
	for id, attrs := range want {
		s := byName(spans, id)
		if s == nil {
			t.Errorf("no span for step %s", id)
			continue
		}
		if s.Parent != run.ID {
			t.Errorf("step %s's span is not the run span's child: %v", id, ancestors(spans, *s))
		}
		for k, v := range attrs {
			if s.Attrs[k] != v {
				t.Errorf("step %s: %s = %q, want %q (%v)", id, k, s.Attrs[k], v, s.Attrs)
			}
		}
		if s.Failed != (id == "soft") {
			t.Errorf("step %s: span status error = %v", id, s.Failed)
		}
	}
	for n := 1; n <= 3; n++ {
		a := byName(spans, fmt.Sprintf("flaky attempt %d", n))
		if a == nil {
			t.Errorf("no span for flaky's attempt %d", n)
			continue
		}
		up := ancestors(spans, *a)
		if len(up) < 3 || !strings.HasPrefix(up[0], "RunActivity:") || up[2] != "flaky" {
			t.Errorf("flaky attempt %d's ancestors: %v (want RunActivity, Start…Activity, flaky)", n, up)
		}
		if failed := n < 3; a.Failed != failed || a.Attrs["capflow.attempt"] != fmt.Sprint(n) {
			t.Errorf("flaky attempt %d: failed=%v attrs %v", n, a.Failed, a.Attrs)
		}
	}
}
