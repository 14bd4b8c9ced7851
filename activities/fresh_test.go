package activities

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/wfapi"
)

// A run resolves to the tools as they were when it began: a tool edited
// before then is what it gets; a run that began before the worker's last
// look at the tools is answered from that look, without another.
func TestResolveSeesToolsAsTheRunBegan(t *testing.T) {
	a, root := newActivities(t)
	e := env(a)
	tool := func(version string) {
		dir := filepath.Join(root, "tools", "pick")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		src := "name: pick\nversion: " + version + "\ndescription: test tool\ncapabilities: [test.pick]\nentrypoint: {type: builtin, name: file.read}\n"
		if err := os.WriteFile(filepath.Join(dir, "tool.yaml"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // the next edit gets a new modification time
	}
	plan := map[string]any{"name": "p", "steps": []any{map[string]any{"id": "s", "capability": "test.pick"}}}
	resolve := func(started time.Time) string {
		v, err := e.ExecuteActivity(a.Resolve, wfapi.ResolveInput{Plan: plan, WorkflowID: testRun, Started: started})
		if err != nil {
			t.Fatal(err)
		}
		var rr wfapi.ResolveResult
		_ = v.Get(&rr)
		if len(rr.Steps) != 1 {
			t.Fatalf("%+v", rr)
		}
		return rr.Steps[0].Version
	}
	longAgo := time.Now().Add(-time.Hour)
	tool("1.0.0")
	if v := resolve(time.Now()); v != "1.0.0" {
		t.Fatalf("resolved to %s, want 1.0.0", v)
	}
	tool("2.0.0")
	if v := resolve(time.Now()); v != "2.0.0" {
		t.Fatalf("a run begun after the edit resolved to %s, want 2.0.0", v)
	}
	tool("3.0.0")
	if v := resolve(longAgo); v != "2.0.0" {
		t.Fatalf("a run begun before the last look resolved to %s, want that look's 2.0.0", v)
	}
	lookBegan := time.Now()
	if v := resolve(time.Time{}); v != "3.0.0" {
		t.Fatalf("with no start given, resolved to %s, want 3.0.0", v)
	}
	// The server's clock may be behind the worker's: a run it says began
	// half a second before the last look may have begun after the edit.
	tool("4.0.0")
	if v := resolve(lookBegan.Add(-500 * time.Millisecond)); v != "4.0.0" {
		t.Fatalf("a run begun within the clocks' skew of the last look resolved to %s, want 4.0.0", v)
	}
}
