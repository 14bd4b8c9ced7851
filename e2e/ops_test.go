package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/metrics"
)

// TestWorkerMetricsAndHealth: a worker started with --metrics-addr answers
// /healthz and serves the SDK's metrics and capflow's step, run and gap
// counters after real runs.
func TestWorkerMetricsAndHealth(t *testing.T) {
	addr := freePort()
	queue := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=metrics-e2e"}
	if err := h.startWorker(append(queue, "CAPFLOW_METRICS_ADDR="+addr)...); err != nil {
		t.Fatal(err)
	}
	defer h.killWorker()

	code, body := httpGet(t, "http://"+addr+"/healthz")
	var hb metrics.HealthBody
	if err := json.Unmarshal([]byte(body), &hb); err != nil || code != 200 || hb.Status != "ok" ||
		hb.Checks["temporal"] != "ok" || hb.Checks["registry"] != "ok" || hb.Checks["worker"] != "ok" {
		t.Fatalf("healthz %d: %s", code, body)
	}

	ok := h.writePlan(t, "metrics-ok", `name: metrics-ok
steps:
  - {id: a, capability: test.noop}
  - {id: b, capability: test.noop, needs: [a]}
  - {id: c, capability: test.soft_fail, needs: [a], on_failure: skip}
`)
	gapPlan := h.writePlan(t, "metrics-gap", `name: metrics-gap
steps:
  - {id: download, capability: youtube.download, with: {url: "x"}}
`)
	if code, env, stderr := h.capflowEnv(t, queue, "run", ok); code != 0 {
		t.Fatalf("run exit %d: %s\n%s", code, env.Message, stderr)
	}
	if code, env, stderr := h.capflowEnv(t, queue, "run", gapPlan); code != 3 {
		t.Fatalf("gap run exit %d: %s\n%s", code, env.Message, stderr)
	}

	// Series by name and the labels that matter (the SDK adds more:
	// namespace, task_queue, workflow_type, ...).
	want := map[string]float64{
		`capflow_steps_ended capability="test.noop" status="succeeded"`:         2,
		`capflow_steps_ended capability="test.soft_fail" status="skipped"`:      1,
		`capflow_runs_ended status="passed" task_queue="metrics-e2e"`:           1,
		`capflow_runs_ended status="partial-complete"`:                          1,
		`capflow_gaps reason="no_capability_match"`:                             1,
		`capflow_step_duration_count capability="test.noop" status="succeeded"`: 2,
		`capflow_step_duration_bucket capability="test.noop" le="3600"`:         2,
	}
	var text string
	deadline := time.Now().Add(15 * time.Second) // tally reports each second
	for {
		_, text = httpGet(t, "http://"+addr+"/metrics")
		missing := ""
		for series, v := range want {
			if got, found := sample(text, series); !found || got != v {
				missing += series + " "
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics missing or wrong: %s\n%s", missing, grepLines(text, "capflow_"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The SDK's own metrics come through the same handler.
	for _, name := range []string{"temporal_workflow_completed", "temporal_activity_execution_latency_bucket", "temporal_request"} {
		if !strings.Contains(text, name) {
			t.Errorf("no SDK metric %s in /metrics", name)
		}
	}
	for _, le := range []string{"0.005", "0.25", "1", "30", "900", "+Inf"} {
		if _, found := sample(text, `capflow_step_duration_bucket capability="test.noop" le="`+le+`"`); !found {
			t.Errorf("step duration histogram lacks the documented bucket %s:\n%s", le, grepLines(text, "capflow_step_duration_bucket"))
		}
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sample sums the samples of a metric whose labels include the given
// ones: "name k="v" k2="v2"".
func sample(text, query string) (float64, bool) {
	parts := strings.Fields(query)
	sum, found := 0.0, false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, parts[0]+"{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, parts[0]), "} ")
		if !ok {
			continue
		}
		have := map[string]bool{}
		for _, kv := range strings.Split(strings.TrimPrefix(labels, "{"), ",") {
			have[kv] = true
		}
		all := true
		for _, kv := range parts[1:] {
			all = all && have[kv]
		}
		if v, err := strconv.ParseFloat(value, 64); all && err == nil {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
