package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/capflow/capflow/internal/wfapi"
)

type agentData struct {
	Verdict  string                 `json:"verdict"`
	Headline string                 `json:"headline"`
	Status   string                 `json:"status"`
	Done     []map[string]string    `json:"done"`
	Missing  []map[string]string    `json:"missing"`
	Route    map[string]string      `json:"route"`
	Gaps     []map[string]any       `json:"gaps"`
	Result   map[string]interface{} `json:"result"`
}

func caps(ops []map[string]string) string {
	var out []string
	for _, o := range ops {
		out = append(out, o["step_id"]+"="+o["capability"])
	}
	return strings.Join(out, ",")
}

func TestAgentSeedRequestReportsWhatIsMissing(t *testing.T) {
	code, env, stderr := h.capflowEnv(t, []string{"CAPFLOW_PROGRESS=1"}, "agent", "Download https://youtu.be/dQw4w9WgXcQ and put it on my Google Drive in folder Music")
	var d agentData
	data(t, env, &d)
	if code != 3 || d.Verdict != "task not completed" || d.Route["id"] != "video-to-drive" || len(d.Done) != 0 ||
		caps(d.Missing) != "download=media.download,upload=storage.upload" {
		t.Fatalf("exit %d: %+v", code, d)
	}
	for _, phase := range []string{"planning", "gap check", "policy check"} {
		if !strings.Contains(stderr, "● "+phase) {
			t.Fatalf("no %q phase in progress:\n%s", phase, stderr)
		}
	}
}

func TestAgentRunsARoutedRequest(t *testing.T) {
	code, env, _ := h.capflow(t, "agent", "what is the sha256 of tools/noop/run.sh")
	var d agentData
	data(t, env, &d)
	if code != 0 || d.Verdict != "task completed" || caps(d.Done) != "checksum_1=file.checksum" {
		t.Fatalf("exit %d: %+v", code, d)
	}
}

// A Russian request is answered in Russian (the design's own words), and
// pretty output ends with what the run found.
func TestAgentAnswersInTheRequestsLanguage(t *testing.T) {
	code, env, _ := h.capflow(t, "agent", "посчитай хеш tools/noop/run.sh")
	var d agentData
	data(t, env, &d)
	sum, _ := d.Result["steps"].([]any)[0].(map[string]any)["envelope"].(map[string]any)["data"].(map[string]any)["sha256"].(string)
	if code != 0 || d.Verdict != "task completed" || d.Headline != "Задача успешно выполнена" || len(sum) != 64 {
		t.Fatalf("exit %d: %+v", code, d)
	}
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), "agent", "посчитай хеш tools/noop/run.sh", "--project", h.project, "--output", "pretty")
	cmd.Env = h.env()
	code, out, _ := runCmd(t, cmd)
	for _, want := range []string{"✓ Задача успешно выполнена", "выполненные операции:", "checksum_1  file.checksum", "ответ:", sum} {
		if code != 0 || !strings.Contains(out.String(), want) {
			t.Fatalf("exit %d, no %q in:\n%s", code, want, out.String())
		}
	}
	code, env, _ = h.capflow(t, "agent", "скачай https://youtu.be/x и положи на гугл диск")
	data(t, env, &d)
	if code != 3 || d.Headline != "Задача не выполнена" {
		t.Fatalf("exit %d: %+v", code, d)
	}
}

func TestRouteWithoutLLMNamesClosestIntents(t *testing.T) {
	code, env, _ := h.capflowEnv(t, []string{"CAPFLOW_ROUTER_LLM_BASE_URL="}, "route", "please upload my holiday video to the cloud")
	var d map[string]any
	data(t, env, &d)
	closest, _ := d["closest"].([]any)
	if code != 3 || !strings.Contains(env.Message, "no route") || len(closest) == 0 {
		t.Fatalf("exit %d %s %v", code, env.Message, d)
	}
}

func TestLLMFallback(t *testing.T) {
	logf := filepath.Join(h.tmp, "llm.log")
	code, env, stderr := h.capflowEnv(t, []string{"LLM_LOG=1"}, "agent", "please do the confident thing twice")
	var d agentData
	data(t, env, &d)
	if code != 0 || d.Verdict != "task completed" || d.Route["kind"] != "llm" || caps(d.Done) != "first=test.noop,second=test.noop" {
		t.Fatalf("exit %d: %+v", code, d)
	}
	_ = os.WriteFile(logf, []byte(stderr), 0o644)
	if !strings.Contains(stderr, "=== llm-1 request ===") || !strings.Contains(stderr, "extracted content") || strings.Contains(stderr, "sk-e2e-llm-key") {
		t.Fatalf("LLM_LOG output wrong or leaks the key:\n%s", stderr)
	}
	code, env, _ = h.capflow(t, "agent", "an unsure request nobody has a rule for")
	data(t, env, &d)
	if code != 3 || d.Verdict != "task not completed" || len(d.Gaps) != 1 || d.Gaps[0]["reason"] != "low_confidence" {
		t.Fatalf("low confidence must be refused with a gap: exit %d %+v", code, d)
	}
}

// The fallback over Anthropic's Messages API (api: anthropic): the
// official SDK sends the key (a bearer token), the system prompt apart
// from the request, and reads the plan from the answer's text block.
func TestLLMFallbackOverAnthropic(t *testing.T) {
	var got struct {
		path, key string
		body      struct {
			Model    string `json:"model"`
			System   []struct{ Text string }
			Messages []struct{ Role string }
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.path, got.key = r.URL.Path, r.Header.Get("Authorization")
		_ = json.NewDecoder(r.Body).Decode(&got.body)
		plan := `{"name":"claude-noop","steps":[{"id":"only","capability":"test.noop","coverage_confidence":0.93,"coverage_rationale":"noop does it"}]}`
		b, _ := json.Marshal(map[string]any{"id": "msg_e2e", "type": "message", "role": "assistant", "model": "claude-e2e", "stop_reason": "end_turn",
			"content": []any{map[string]any{"type": "text", "text": plan}}, "usage": map[string]any{"input_tokens": 900, "output_tokens": 60}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	env := []string{"CAPFLOW_ROUTER_LLM_API=anthropic", "CAPFLOW_ROUTER_LLM_BASE_URL=" + srv.URL, "CAPFLOW_ROUTER_LLM_MODEL=claude-e2e", "LLM_LOG=1"}
	code, e, stderr := h.capflowEnv(t, env, "agent", "please do the claude thing")
	var d agentData
	data(t, e, &d)
	if code != 0 || d.Verdict != "task completed" || d.Route["kind"] != "llm" || caps(d.Done) != "only=test.noop" {
		t.Fatalf("exit %d: %+v\n%s", code, d, stderr)
	}
	if got.path != "/v1/messages" || got.key != "Bearer sk-e2e-llm-key" || got.body.Model != "claude-e2e" || len(got.body.System) != 1 ||
		!strings.Contains(got.body.System[0].Text, "test.noop") || len(got.body.Messages) != 1 || got.body.Messages[0].Role != "user" {
		t.Fatalf("the Messages request: %+v", got)
	}
	if strings.Contains(stderr, "sk-e2e-llm-key") || !strings.Contains(stderr, "=== llm-1 request ===\nanthropic ") {
		t.Fatalf("LLM_LOG leaks the key or does not name the API:\n%s", stderr)
	}
}

func TestRequestThroughTheWorkflow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tt := range []struct {
		request, status, kind, id string
	}{
		{"sha256 of tools/noop/run.sh", "passed", "rule", "checksum"},
		{"please do the confident thing", "passed", "llm", "e2e-model"},
		{"Download https://youtu.be/x and put it on the drive", "partial-complete", "rule", "video-to-drive"},
	} {
		run, err := h.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "capflow"}, "PlanWorkflow", map[string]any{"request": tt.request})
		if err != nil {
			t.Fatal(err)
		}
		var res wfapi.Result
		if err := run.Get(ctx, &res); err != nil {
			t.Fatal(err)
		}
		if string(res.Status) != tt.status || res.Route == nil || res.Route.Kind != tt.kind || res.Route.ID != tt.id {
			t.Fatalf("%q: %s %s %+v", tt.request, res.Status, res.Message, res.Route)
		}
		md, _ := os.ReadFile(res.Report.Markdown)
		if !strings.Contains(string(md), "routed by") {
			t.Fatalf("the report does not say how the request was routed:\n%s", md)
		}
		if tt.kind == "rule" && tt.status == "passed" {
			recordHistory(t, run.GetID(), "request-routed")
		}
	}
}
