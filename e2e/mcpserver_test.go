package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/wfapi"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCall calls one of capflow's MCP tools: its envelope (the
// structuredContent), and whether the result was an error.
func mcpCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, token any) (map[string]any, bool) {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil || env["toolId"] == nil {
		t.Fatalf("%s: structuredContent is not an envelope: %s", name, raw)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != env["message"] {
		t.Fatalf("%s: text %q, envelope message %q", name, text, env["message"])
	}
	return env, res.IsError
}

// An agent drives capflow through MCP with the official Go SDK's client:
// from a request to a plan, a check, a durable run that waits for an
// approval it answers, to the report; and a run it waits for, with
// progress notifications.
func TestCapflowAsMCPServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, r.Params.Message)
		}})
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), "mcp", "--project", h.project)
	cmd.Env = h.env()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Fatalf("%s has no schemas", tool.Name)
		}
	}
	slices.Sort(names)
	if strings.Join(names, " ") != "cancel decide plan_check report route run status" {
		t.Fatalf("tools: %v", names)
	}
	env, isErr := mcpCall(t, ctx, cs, "route", map[string]any{"text": "what is the sha256 of tools/noop/run.sh"}, nil)
	if isErr || env["success"] != true {
		t.Fatalf("route: %v", env)
	}
	plan := map[string]any{"name": "mcp-agent", "steps": []any{
		map[string]any{"id": "first", "capability": "test.noop"},
		map[string]any{"id": "ok", "capability": "flow.approve", "needs": []any{"first"}, "with": map[string]any{"prompt": "Ship it?"}},
		map[string]any{"id": "done", "capability": "test.noop", "needs": []any{"ok"}},
	}}
	env, isErr = mcpCall(t, ctx, cs, "plan_check", map[string]any{"plan": plan}, nil)
	if isErr || env["success"] != true {
		t.Fatalf("plan_check: %v", env)
	}
	env, isErr = mcpCall(t, ctx, cs, "plan_check", map[string]any{"plan": map[string]any{"name": "bad", "steps": []any{map[string]any{"id": "a", "capability": "no.such"}}}}, nil)
	if !isErr || env["success"] != false {
		t.Fatalf("plan_check of a plan with a gap: %v", env)
	}
	env, _ = mcpCall(t, ctx, cs, "run", map[string]any{"plan": plan}, nil)
	id, _ := env["data"].(map[string]any)["workflow_id"].(string)
	if env["success"] != true || id == "" {
		t.Fatalf("run: %v", env)
	}
	waitStep(t, id, "ok", "waiting", func(s wfapi.StepState) bool { return s == wfapi.StepWaiting })
	if env, isErr = mcpCall(t, ctx, cs, "decide", map[string]any{"id": id, "step": "ok", "action": "approve", "comment": "from an agent"}, nil); isErr {
		t.Fatalf("decide: %v", env)
	}
	if env, isErr = mcpCall(t, ctx, cs, "decide", map[string]any{"id": id, "step": "ok", "action": "nope"}, nil); !isErr || !strings.Contains(env["message"].(string), "approve, reject, retry, skip or fail") {
		t.Fatalf("decide with an unknown action: %v", env)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		env, _ = mcpCall(t, ctx, cs, "status", map[string]any{"id": id}, nil)
		if env["data"].(map[string]any)["status"] == "passed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not pass: %v", env)
		}
	}
	env, isErr = mcpCall(t, ctx, cs, "report", map[string]any{"id": id}, nil)
	steps, _ := env["data"].(map[string]any)["steps"].([]any)
	var decided string
	for _, s := range steps {
		if s := s.(map[string]any); s["id"] == "ok" {
			d := s["decisions"].([]any)[0].(map[string]any)
			decided = d["action"].(string) + " by " + d["by"].(string) + ": " + d["comment"].(string)
		}
	}
	if isErr || decided != "approve by mcp: from an agent" {
		t.Fatalf("report: %q %v", decided, env)
	}
	// A run waited for, with progress notifications while it runs.
	env, isErr = mcpCall(t, ctx, cs, "run", map[string]any{"plan": map[string]any{"name": "mcp-wait", "steps": []any{
		map[string]any{"id": "a", "capability": "test.noop"}, map[string]any{"id": "b", "capability": "test.noop", "needs": []any{"a"}}}}, "wait": true}, "tok-1")
	if isErr || env["data"].(map[string]any)["status"] != "passed" {
		t.Fatalf("run with wait: %v", env)
	}
	waitNotified(t, &mu, &progress, "✓ b")
}

// waitNotified waits for a progress notification holding want. The server
// sends every notification before its answer, but the client hands
// notifications to their handler on its own goroutines: the last ones may
// land a moment after the answer.
func waitNotified(t *testing.T, mu *sync.Mutex, progress *[]string, want string) {
	t.Helper()
	seen := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(*progress, func(p string) bool { return strings.Contains(p, want) })
	}
	for deadline := time.Now().Add(3 * time.Second); !seen() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !seen() {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("progress notifications: %q", *progress)
	}
}
