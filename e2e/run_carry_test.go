// What a run carries and where it refuses: secrets kept out of every
// record, large outputs by file, a raw client's JSON, an unreachable server.

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
)

func TestSecretsNeverLeak(t *testing.T) {
	p := h.writePlan(t, "secret", "name: secret\nsteps:\n  - {id: s, capability: test.secret}\n")
	code, r := h.run(t, p)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s", code, r.Message)
	}
	const secret = "e2e-super-secret-value"
	// Payloads are raw bytes in the protobuf encoding (JSON would
	// base64 them and hide the secret from this check).
	var hist strings.Builder
	it := h.client.GetWorkflowHistory(context.Background(), r.WorkflowID, r.RunID, false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := proto.Marshal(ev)
		hist.Write(b)
	}
	if hist.Len() == 0 || strings.Contains(hist.String(), secret) {
		t.Fatal("the secret reached Temporal history")
	}
	if !strings.Contains(hist.String(), "[REDACTED]") {
		t.Fatal("expected the redaction mark in history")
	}
	var leaks []string
	_ = filepath.Walk(filepath.Join(h.project, ".capflow/runs", r.WorkflowID), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
				leaks = append(leaks, p)
			}
		}
		return nil
	})
	if strings.Contains(h.workerLog(), secret) {
		leaks = append(leaks, "worker log")
	}
	if len(leaks) > 0 {
		t.Fatalf("secret leaked into %v", leaks)
	}
}

func TestLargeOutputTravelsByFile(t *testing.T) {
	p := h.writePlan(t, "big", `name: big
steps:
  - {id: big, capability: test.big}
  - {id: use, capability: test.slow, with: {seconds: "${steps.big.data.size}"}, timeout: 5s, on_failure: fail}
`)
	code, r := h.run(t, p)
	// `use` receives 300000 seconds and is stopped by its timeout: what
	// matters is that the value arrived through the file.
	big := r.step(t, "big")
	if big.Status != "succeeded" || big.DataFile == "" || !fileExists(big.DataFile) {
		t.Fatalf("exit %d big: %+v", code, big)
	}
	var hist int
	it := h.client.GetWorkflowHistory(context.Background(), r.WorkflowID, r.RunID, false, 0)
	for it.HasNext() {
		ev, _ := it.Next()
		b, _ := proto.Marshal(ev)
		if len(b) > hist {
			hist = len(b)
		}
	}
	if hist > 200<<10 {
		t.Fatalf("largest history event is %d bytes: data did not go by file", hist)
	}
	in, _ := os.ReadFile(filepath.Join(h.project, ".capflow/runs", r.WorkflowID, "records/use/input.json"))
	if !strings.Contains(string(in), `"seconds":300000`) {
		t.Fatalf("use did not receive the value from big's stored data: %s", in)
	}
}

func TestRawClientJSON(t *testing.T) {
	// Another service, with only a Temporal client and plain JSON.
	in := map[string]any{"plan": map[string]any{"name": "raw", "steps": []any{
		map[string]any{"id": "a", "capability": "test.noop"},
		map[string]any{"id": "b", "capability": "test.noop", "needs": []any{"a"}},
	}}, "inputs": map[string]any{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "raw-json-run", TaskQueue: "capflow"}, "PlanWorkflow", in)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"status", "steps", "gaps", "report", "duration_ms"} {
		if _, ok := out[k]; !ok {
			t.Fatalf("result lacks %q: %v", k, out)
		}
	}
	step := out["steps"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "status", "tool", "version", "attempts", "envelope"} {
		if _, ok := step[k]; !ok {
			t.Fatalf("step lacks %q: %v", k, step)
		}
	}
	if out["status"] != "passed" {
		t.Fatalf("%v", out["status"])
	}
	desc, err := h.client.DescribeWorkflowExecution(ctx, "raw-json-run", "")
	if err != nil {
		t.Fatal(err)
	}
	sa := desc.WorkflowExecutionInfo.SearchAttributes.GetIndexedFields()
	if !strings.Contains(string(sa["CapflowStatus"].GetData()), "passed") || !strings.Contains(string(sa["CapflowPlan"].GetData()), "raw") {
		t.Fatalf("search attributes: %v", sa)
	}
	// Activity summaries make the Web UI readable.
	found := false
	it := h.client.GetWorkflowHistory(ctx, "raw-json-run", "", false, 0)
	for it.HasNext() {
		ev, _ := it.Next()
		if md := ev.GetUserMetadata(); md != nil && md.GetSummary() != nil && strings.Contains(string(md.GetSummary().GetData()), "b · test.noop → noop@1.0.0") {
			found = true
		}
	}
	if !found {
		t.Fatal("no activity summary `b · test.noop → noop@1.0.0` in history")
	}
	recordHistory(t, "raw-json-run", "pipeline")
}

func TestUnreachableServerFailsFast(t *testing.T) {
	p := h.writePlan(t, "unreach", "name: u\nsteps:\n  - {id: a, capability: test.noop}\n")
	start := time.Now()
	code, env, _ := h.capflow(t, "run", p, "--address", "127.0.0.1:1")
	if code != 1 || !strings.Contains(env.Message, "cannot reach the Temporal server at 127.0.0.1:1") || !strings.Contains(env.Message, "CAPFLOW_TEMPORAL_ADDRESS") || time.Since(start) > 15*time.Second {
		t.Fatalf("exit %d after %s: %s", code, time.Since(start), env.Message)
	}
}
