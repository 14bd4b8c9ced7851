package mcpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestDecideCommands(t *testing.T) {
	h := &handlers{o: Options{By: "agent"}}
	for _, c := range []struct {
		a    args
		want string
	}{
		{args{ID: "r", Step: "ok", Action: "approve", Comment: "fine"}, "approve --by=agent --comment=fine -- r ok"},
		{args{ID: "r", Step: "ok", Action: "reject"}, "approve --reject --by=agent -- r ok"},
		{args{ID: "r", Step: "s", Action: "retry"}, "retry --by=agent -- r s"},
		{args{ID: "r", Step: "s", Action: "skip", Comment: "--output-path=/x"}, "skip --by=agent --comment=--output-path=/x -- r s"},
		{args{ID: "r", Step: "s", Action: "nope"}, "error: action \"nope\": approve, reject, retry, skip or fail"},
		{args{ID: "r", Action: "skip"}, "error: decide needs id and step: step is empty"},
		{args{ID: "--output-path=/x", Step: "s", Action: "skip"}, `error: decide needs id and step: id "--output-path=/x" starts with "-": no run or step ID does`},
		{args{ID: "r", Step: "-s", Action: "skip"}, `error: decide needs id and step: step "-s" starts with "-": no run or step ID does`},
	} {
		c2, err := decideCommand(h, c.a)
		got := strings.Join(c2.argv(nil), " ")
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
}

// TestArgumentsAreData: every value from the client is a positional after
// "--" (the hostile audit's H4: a route text or a status id of
// "--output-path=..." overwrote a file), and IDs that read as flags are
// refused.
func TestArgumentsAreData(t *testing.T) {
	h := &handlers{o: Options{Root: t.TempDir()}}
	byName := map[string]toolDef{}
	for _, d := range tools {
		byName[d.name] = d
	}
	c, err := byName["route"].command(h, args{Text: "--output-path=/etc/x"})
	if got := strings.Join(c.argv([]string{"--output", "json"}), " "); err != nil || got != "route --output json -- --output-path=/etc/x" {
		t.Fatalf("route: %q %v", got, err)
	}
	for _, tool := range []string{"status", "cancel", "report"} {
		if _, err := byName[tool].command(h, args{ID: "--output-path=/etc/x"}); err == nil || !strings.Contains(err.Error(), `starts with "-"`) {
			t.Errorf("%s of a flag: %v", tool, err)
		}
		c, err := byName[tool].command(h, args{ID: "run-1"})
		if got := strings.Join(c.argv(nil), " "); err != nil || got != tool+" -- run-1" {
			t.Errorf("%s: %q %v", tool, got, err)
		}
	}
}

// TestPlanArgument: a plan is a file of the project, opened beneath its
// root (the hostile audit's M4: /etc/passwd, ../ and a file in $HOME were
// read and their step ids echoed), or a plan object.
func TestPlanArgument(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	h := &handlers{o: Options{PlanDir: t.TempDir(), Root: root}}
	os.MkdirAll(filepath.Join(root, "plans"), 0o755)
	os.WriteFile(filepath.Join(root, "plans", "a.yaml"), []byte("name: a\nsteps: []\n"), 0o644)
	secret := filepath.Join(outside, "secret.yaml")
	os.WriteFile(secret, []byte("name: s\nsteps: [{id: SECRET-ID-789, capability: x.y}]\n"), 0o644)
	os.Symlink(secret, filepath.Join(root, "plans", "link.yaml"))
	if f, err := h.planFile(json.RawMessage(`"plans/a.yaml"`)); err != nil || f != filepath.Join(root, "plans/a.yaml") {
		t.Fatalf("a path in the project: %q %v", f, err)
	}
	if f, err := h.planFile(json.RawMessage(`"` + root + `/plans/a.yaml"`)); err != nil || f != filepath.Join(root, "plans/a.yaml") {
		t.Fatalf("an absolute path in the project: %q %v", f, err)
	}
	for _, bad := range []string{"/etc/passwd", "../../../../etc/passwd", secret, "plans/link.yaml", "plans/none.yaml"} {
		f, err := h.planFile(json.RawMessage(`"` + bad + `"`))
		if err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("plan %s: %q %v", bad, f, err)
		}
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
	r = result([]byte(`{"success":false,"message":"p failed","feedback":[{"phase":"steps","message":"1 failed"},{"phase":"next","message":"x (TOOL_FAILURE, HIGH): capflow rerun r1 --from x"}]}`))
	if text := r.Content[0].(*mcp.TextContent).Text; text != "p failed\nnext: x (TOOL_FAILURE, HIGH): capflow rerun r1 --from x" {
		t.Fatalf("text: %q", text)
	}
	if r := result([]byte("garbage")); !r.IsError || !strings.Contains(r.StructuredContent.(map[string]any)["message"].(string), "garbage") {
		t.Fatalf("garbage: %+v", r)
	}
}

// TestFilesStayInThePlanDir: a link planted at a plan file's (predictable)
// name, or at the folder itself, never leads the server's write out of
// the project (found attacking this server).
func TestFilesStayInThePlanDir(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	canary := filepath.Join(outside, "canary.txt")
	os.WriteFile(canary, []byte("CANARY"), 0o644)
	h := &handlers{o: Options{Root: root, PlanDir: filepath.Join(root, ".capflow", "state", "mcp")}}
	plan := json.RawMessage(`{"name":"p","steps":[]}`)
	sum := sha256.Sum256(plan)
	os.MkdirAll(h.o.PlanDir, 0o755)
	os.Symlink(canary, filepath.Join(h.o.PlanDir, "plan-"+hex.EncodeToString(sum[:8])+".yaml"))
	f, err := h.planFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(canary); string(b) != "CANARY" {
		t.Fatalf("the write followed the link: %s", b)
	}
	if b, _ := os.ReadFile(f); string(b) != string(plan) {
		t.Fatalf("the plan file: %s", b)
	}
	os.RemoveAll(h.o.PlanDir)
	os.Symlink(outside, h.o.PlanDir)
	if _, err := h.inputsFile(map[string]any{"a": 1}); err == nil {
		t.Fatal("a write through a linked folder was taken")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("the server wrote outside the project: %v", ents)
	}
}

// A decision on an agent step's gate names the proposal: the tool passes
// it to the CLI as a flag value, never as a flag of its own.
func TestDecidePassesTheProposal(t *testing.T) {
	h := &handlers{o: Options{By: "mcp"}}
	c, err := decideCommand(h, args{ID: "r", Step: "triage", Action: "approve", Proposal: "3fb3fd91cb0df7ca"})
	if err != nil || !slices.Contains(c.flags, "--proposal=3fb3fd91cb0df7ca") || slices.Contains(c.pos, "3fb3fd91cb0df7ca") {
		t.Fatalf("%+v %v", c, err)
	}
	if c, _ := decideCommand(h, args{ID: "r", Step: "s", Action: "retry", Proposal: "3fb3fd91cb0df7ca"}); slices.ContainsFunc(c.flags, func(f string) bool { return strings.HasPrefix(f, "--proposal") }) {
		t.Fatalf("a retry took a proposal: %+v", c)
	}
}
