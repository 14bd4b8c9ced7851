package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/capflow/capflow/codec"
	"github.com/capflow/capflow/internal/metrics"
	"github.com/capflow/capflow/internal/wfapi"
)

// TestWorkerMetricsAndHealth: a worker started with --metrics-addr answers
// /healthz and serves the SDK's metrics and capflow's step, run and gap
// counters after real runs.
func TestWorkerMetricsAndHealth(t *testing.T) {
	addr := freePort()
	queue := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=metrics-e2e"}
	workerAt(t, h.project, append(queue, "CAPFLOW_METRICS_ADDR="+addr)...)

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
	if code, env, stderr := h.capflowEnv(t, queue, "run", ok); code != 0 {
		t.Fatalf("run exit %d: %s\n%s", code, env.Message, stderr)
	}
	// capflow run refuses a plan with a gap before it starts; a client
	// that starts it anyway gets a run that ends partial-complete.
	gapPlan := map[string]any{"name": "metrics-gap", "steps": []any{map[string]any{"id": "download", "capability": "youtube.download", "with": map[string]any{"url": "x"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wf, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "metrics-gap-" + time.Now().Format("150405.000"), TaskQueue: "metrics-e2e"}, wfapi.WorkflowType, wfapi.Input{Plan: gapPlan})
	if err != nil {
		t.Fatal(err)
	}
	if err := wf.Get(ctx, nil); err != nil {
		t.Fatal(err)
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

// TestSchedules: a schedule checks its plan first, runs it on its
// interval with the inputs it was given (runs named after it, listed by
// `capflow runs --schedule`), can be triggered, listed and deleted.
func TestSchedules(t *testing.T) {
	log := h.logPath("schedule.log")
	p := h.writePlan(t, "scheduled", `name: scheduled
inputs:
  log: {type: string}
steps:
  - {id: tick, capability: test.slow, with: {seconds: 0, log: "${inputs.log}"}}
`)
	gapPlan := h.writePlan(t, "scheduled-gap", `name: scheduled-gap
steps:
  - {id: download, capability: youtube.download, with: {url: "x"}}
`)
	for _, tc := range []struct {
		args  []string
		exit  int
		field string
	}{
		{[]string{"bad/name", p, "--every", "1h", "--input", "log=x"}, 2, "NAME"},
		{[]string{"e2e-none", p, "--input", "log=x"}, 2, "--cron"},
		{[]string{"e2e-both", p, "--every", "1h", "--cron", "* * * * *", "--input", "log=x"}, 2, "--cron"},
		{[]string{"e2e-fast", p, "--every", "10ms", "--input", "log=x"}, 2, "--every"},
		{[]string{"e2e-overlap", p, "--every", "1h", "--overlap", "sometimes", "--input", "log=x"}, 2, "--overlap"},
		{[]string{"e2e-cron", p, "--cron", "not a cron", "--input", "log=x"}, 2, "--cron"},
		// Six fields (seconds first) would run every 5 s, not every 5 min.
		{[]string{"e2e-seconds", p, "--cron", "*/5 * * * * *", "--input", "log=x"}, 2, "five fields"},
		{[]string{"e2e-noinput", p, "--every", "1h"}, 2, ""},
		{[]string{"e2e-gap", gapPlan, "--every", "1h"}, 3, ""},
	} {
		code, env, stderr := h.capflow(t, append([]string{"schedule", "create"}, tc.args...)...)
		if code != tc.exit {
			t.Fatalf("schedule create %v: exit %d, want %d: %s\n%s", tc.args, code, tc.exit, env.Message, stderr)
		}
		if tc.field != "" && !strings.Contains(fmt.Sprint(env.Feedback), tc.field) && !strings.Contains(env.Message, tc.field) {
			t.Errorf("schedule create %v: the error does not name %s: %s %v", tc.args, tc.field, env.Message, env.Feedback)
		}
	}

	code, env, stderr := h.capflow(t, "schedule", "create", "e2e-nightly", p, "--cron", "0 3 * * *", "--input", "log="+log, "--note", "nightly")
	var row map[string]any
	data(t, env, &row)
	if code != 0 || row["spec"] != "0 3 * * *" || !strings.Contains(fmt.Sprint(row["next_run"]), "T03:00:00") || row["plan"] != "scheduled" {
		t.Fatalf("cron schedule: exit %d %+v %s\n%s", code, row, env.Message, stderr)
	}
	if code, env, _ := h.capflow(t, "schedule", "create", "e2e-nightly", p, "--cron", "0 4 * * *", "--input", "log="+log); code != 2 || !strings.Contains(env.Message, "already exists") {
		t.Fatalf("a second schedule of the same name: exit %d %s", code, env.Message)
	}
	code, env, stderr = h.capflow(t, "schedule", "create", "e2e-often", p, "--every", "2s", "--input", "log="+log)
	if code != 0 {
		t.Fatalf("interval schedule: exit %d %s\n%s", code, env.Message, stderr)
	}
	defer h.capflow(t, "schedule", "delete", "e2e-often")

	// Its runs: named after it, passed, with the input it was given.
	var runs []map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, env, _ := h.capflow(t, "runs", "--schedule", "e2e-often", "--status", "passed")
		var d struct {
			Runs []map[string]any `json:"runs"`
		}
		data(t, env, &d)
		if runs = d.Runs; len(runs) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schedule ran %d time(s) in 60 s; worker log:\n%s", len(runs), h.workerLog())
		}
		time.Sleep(time.Second)
	}
	for _, r := range runs {
		if !strings.HasPrefix(fmt.Sprint(r["workflow_id"]), "e2e-often-") || r["schedule"] != "e2e-often" || r["plan"] != "scheduled" {
			t.Fatalf("a scheduled run: %+v", r)
		}
	}
	if b, _ := os.ReadFile(log); strings.Count(string(b), "finished") < 2 {
		t.Fatalf("the runs did not use the schedule's input (log %s):\n%s", log, b)
	}

	// Triggered now, whatever its timetable.
	if code, env, _ := h.capflow(t, "schedule", "trigger", "e2e-nightly"); code != 0 {
		t.Fatalf("trigger: exit %d %s", code, env.Message)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		_, env, _ := h.capflow(t, "runs", "--schedule", "e2e-nightly")
		var d struct {
			Runs []map[string]any `json:"runs"`
		}
		data(t, env, &d)
		if len(d.Runs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the triggered schedule did not start a run: %+v", d.Runs)
		}
		time.Sleep(500 * time.Millisecond)
	}

	var list struct {
		Schedules []map[string]any `json:"schedules"`
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, env, _ = h.capflow(t, "schedule", "list")
		data(t, env, &list)
		names := map[string]map[string]any{}
		for _, s := range list.Schedules {
			names[fmt.Sprint(s["name"])] = s
		}
		if n, o := names["e2e-nightly"], names["e2e-often"]; n != nil && o != nil && n["note"] == "nightly" && o["spec"] == "every 2s" && n["plan_file"] == p {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule list: %+v", list.Schedules)
		}
		time.Sleep(time.Second) // schedule visibility lags a little
	}

	if code, env, _ := h.capflow(t, "schedule", "delete", "e2e-nightly"); code != 0 {
		t.Fatalf("delete: exit %d %s", code, env.Message)
	}
	if code, env, _ := h.capflow(t, "schedule", "delete", "e2e-nightly"); code != 2 || !strings.Contains(env.Message, "no schedule") {
		t.Fatalf("delete again: exit %d %s", code, env.Message)
	}
	if code, _, _ := h.capflow(t, "schedule", "trigger", "e2e-gone"); code != 2 {
		t.Fatalf("trigger of no schedule: exit %d", code)
	}
}

// TestEncryptedPayloads: with CAPFLOW_PAYLOAD_KEY on the worker and the
// CLI, nothing a run carries is readable in Temporal's history; the CLI
// without the key says which key it lacks; the codec server decodes for
// the Web UI.
func TestEncryptedPayloads(t *testing.T) {
	const secret = "tell-no-one-42"
	key := []string{"CAPFLOW_PAYLOAD_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)), "CAPFLOW_TEMPORAL_TASK_QUEUE=crypt-e2e"}
	workerAt(t, h.project, key...)
	p := h.writePlan(t, "encrypted", `name: encrypted
inputs:
  note: {type: string}
steps:
  - {id: a, capability: test.noop, with: {note: "${inputs.note}"}}
  - {id: b, capability: test.soft_fail, needs: [a], on_failure: skip, with: {note: "${inputs.note}"}}
`)
	code, env, stderr := h.capflowEnv(t, key, "run", p, "--input", "note="+secret)
	var r runResult
	data(t, env, &r)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s\n%s", code, r.Status, env.Message, stderr)
	}

	// The raw history, read without the key.
	ctx := context.Background()
	it := h.client.GetWorkflowHistory(ctx, r.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var input *commonpb.Payloads
	events := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		raw, _ := proto.Marshal(ev)
		if bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("event %d (%s) holds the secret in clear", ev.GetEventId(), ev.GetEventType())
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			input = a.GetInput()
		}
	}
	if events < 10 || input == nil || string(input.Payloads[0].Metadata["encoding"]) != codec.Encoding {
		t.Fatalf("%d events; input %v", events, input)
	}

	code, env, _ = h.capflowEnv(t, []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=crypt-e2e"}, "status", r.WorkflowID)
	if code == 0 || !strings.Contains(env.Message, "CAPFLOW_PAYLOAD_KEY") {
		t.Fatalf("status without the key: exit %d %s", code, env.Message)
	}
	code, env, _ = h.capflowEnv(t, key, "status", r.WorkflowID)
	if data(t, env, &r); code != 0 || r.Status != "passed" {
		t.Fatalf("status with the key: exit %d %s", code, env.Message)
	}
	// rerun reads the first run's input from history: decrypted with the
	// key, refused with a clear reason without it.
	code, env, stderr = h.capflowEnv(t, []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=crypt-e2e"}, "rerun", r.WorkflowID)
	if code != 2 || !strings.Contains(env.Message, "CAPFLOW_PAYLOAD_KEY") {
		t.Fatalf("rerun without the key: exit %d %s\n%s", code, env.Message, stderr)
	}
	var again runResult
	code, env, stderr = h.capflowEnv(t, key, "rerun", r.WorkflowID)
	if data(t, env, &again); code != 0 || again.Status != "passed" || again.WorkflowID == r.WorkflowID {
		t.Fatalf("rerun with the key: exit %d %s %s\n%s", code, again.Status, env.Message, stderr)
	}

	// The codec server, as the Web UI calls it.
	addr := freePort()
	cs := exec.Command(filepath.Join(h.bin, "capflow"), "codec-server", "--addr", addr, "--output", "json")
	cs.Env = append(h.env(), key...)
	var csOut bytes.Buffer
	cs.Stdout, cs.Stderr = &csOut, &csOut
	if err := cs.Start(); err != nil {
		t.Fatal(err)
	}
	body, _ := protojson.Marshal(input)
	var decoded []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Post("http://"+addr+"/default/decode", "application/json", bytes.NewReader(body))
		if err == nil {
			decoded, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("codec server did not answer: %v\n%s", err, csOut.String())
		}
	}
	var out commonpb.Payloads
	if err := protojson.Unmarshal(decoded, &out); err != nil || len(out.Payloads) != 1 || !bytes.Contains(out.Payloads[0].Data, []byte(secret)) {
		t.Fatalf("codec server answer: %s (%v)", decoded, err)
	}
	_ = cs.Process.Signal(syscall.SIGINT)
	if err := cs.Wait(); err != nil {
		t.Fatalf("codec server did not stop cleanly: %v\n%s", err, csOut.String())
	}
}

// TestTypeScriptClient: a service written in TypeScript with Temporal's
// own client (examples/ts-client) starts plans, follows the progress
// query, validates input and result against schemas/, and exits with the
// CLI's codes.
func TestTypeScriptClient(t *testing.T) {
	script := filepath.Join(h.repo, "examples/ts-client/dist/start-plan.js")
	if !fileExists(script) {
		t.Fatalf("%s is not built: run `make ts-client` (make test does)", script)
	}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command("node", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+h.address, "CAPFLOW_SCHEMAS="+filepath.Join(h.repo, "schemas"))
		code, out, errb := runCmd(t, cmd)
		return code, out.String(), errb.String()
	}

	code, out, stderr := run(filepath.Join(h.project, "plans/examples/file-pipeline.yaml"), "--input", "out_dir=.capflow/out/ts-client")
	var r runResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || r.Status != "passed" || len(r.Steps) != 4 {
		t.Fatalf("exit %d, %v: %s\n%s", code, err, out, stderr)
	}
	if !strings.HasPrefix(r.WorkflowID, "ts-file-pipeline-") || !strings.Contains(stderr, "started "+r.WorkflowID) {
		t.Fatalf("workflow %s; stderr:\n%s", r.WorkflowID, stderr)
	}
	for _, s := range r.Steps {
		if s.Status != wfapi.StepSucceeded {
			t.Fatalf("step %s %s", s.ID, s.Status)
		}
	}
	if b, err := os.ReadFile(filepath.Join(h.project, ".capflow/out/ts-client/MANIFEST.txt")); err != nil || !strings.Contains(string(b), "sha256 ") {
		t.Fatalf("the plan's inputs did not reach it: %q %v", b, err)
	}
	if !fileExists(r.Report.JSON) {
		t.Fatalf("no report at %s", r.Report.JSON)
	}
	validResult(t, r.WorkflowID)

	gapPlan := h.writePlan(t, "ts-gap", "name: ts-gap\nsteps:\n  - {id: download, capability: youtube.download, with: {url: x}}\n")
	if code, out, stderr := run(gapPlan); code != 3 || !strings.Contains(out, `"status":"partial-complete"`) {
		t.Fatalf("a plan with a gap: exit %d %s\n%s", code, out, stderr)
	}
	if code, _, stderr := run(gapPlan, "--input", "nonsense"); code != 2 || !strings.Contains(stderr, "want name=value") {
		t.Fatalf("a bad argument: exit %d\n%s", code, stderr)
	}
}
