package mcpserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecideCommands(t *testing.T) {
	h := &handlers{o: Options{By: "agent"}}
	for _, c := range []struct {
		a    args
		want string
	}{
		{args{ID: "r", Step: "ok", Action: "approve", Comment: "fine"}, "approve r ok --by agent --comment fine"},
		{args{ID: "r", Step: "ok", Action: "reject"}, "approve r ok --reject --by agent"},
		{args{ID: "r", Step: "s", Action: "retry"}, "retry r s --by agent"},
		{args{ID: "r", Step: "s", Action: "nope"}, "error: action \"nope\": approve, reject, retry, skip or fail"},
		{args{ID: "r", Action: "skip"}, "error: decide needs id and step"},
	} {
		cmd, err := decideCommand(h, c.a)
		got := strings.Join(cmd, " ")
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
}

func TestPlanArgument(t *testing.T) {
	h := &handlers{o: Options{PlanDir: t.TempDir()}}
	if f, err := h.planFile(json.RawMessage(`"plans/a.yaml"`)); err != nil || f != "plans/a.yaml" {
		t.Fatalf("a path: %q %v", f, err)
	}
	h.o.Root = "/srv/project"
	if f, err := h.planFile(json.RawMessage(`"plans/a.yaml"`)); err != nil || f != "/srv/project/plans/a.yaml" {
		t.Fatalf("a path in the project: %q %v", f, err)
	}
	if f, _ := h.planFile(json.RawMessage(`"/abs/a.yaml"`)); f != "/abs/a.yaml" {
		t.Fatalf("an absolute path: %q", f)
	}
	f, err := h.planFile(json.RawMessage(`{"name": "p", "steps": []}`))
	if err != nil || filepath.Dir(f) != h.o.PlanDir {
		t.Fatalf("an object: %q %v", f, err)
	}
	if b, _ := os.ReadFile(f); string(b) != `{"name": "p", "steps": []}` {
		t.Fatalf("the written plan: %s", b)
	}
	for _, bad := range []string{`""`, `42`, `null`, `[1]`} {
		if _, err := h.planFile(json.RawMessage(bad)); err == nil {
			t.Errorf("plan %s was taken", bad)
		}
	}
}

func TestResultOfAnEnvelope(t *testing.T) {
	r := result([]byte(`{"toolId":"capflow-run","exitCode":3,"success":false,"message":"gaps","feedback":[]}`))
	if !r.IsError || r.StructuredContent.(map[string]any)["exitCode"] != float64(3) {
		t.Fatalf("%+v", r)
	}
	if r := result([]byte("garbage")); !r.IsError || !strings.Contains(r.StructuredContent.(map[string]any)["message"].(string), "garbage") {
		t.Fatalf("garbage: %+v", r)
	}
}
