package plantest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/wfapi"
)

// The inline steps a run starts with, which Resolve evaluates ahead
// (baseline 4), take what a case gives them, as any step does: the
// stand-in knows the run by its ID, which their calls carry.
func TestCaseGivesInlineStepsTheirData(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "flow.yaml")
	_ = os.WriteFile(plan, []byte(`name: flow
steps:
  - {id: a, capability: text.render, with: {template: "a"}}
  - {id: b, capability: text.render, needs: [a], with: {template: "{{.t}}", values: {t: "${steps.a.data.text}"}}}
  - {id: c, capability: text.render, needs: [b], with: {template: "c"}}
`), 0o644)
	s := prepareIn(t, dir, plan)
	given := map[string]Given{"a": {HasData: true, Data: map[string]any{"text": "given", "bytes": 5}}, "b": {Error: &GivenError{Code: "TOOL_FAILURE"}}}
	out := s.run(&Case{Name: "given", Steps: given}, 1)
	if out.err != nil || out.res == nil {
		t.Fatalf("run: %v", out.err)
	}
	if got := states(out.res); got != "a=succeeded b=failed c=skipped" || out.res.Status != wfapi.StatusFailed {
		t.Fatalf("%s: %s, want a given its data, b failing as the case says", out.res.Status, got)
	}
	if a := out.res.Steps[0].Envelope; a == nil || fmt.Sprint(a.Data) != "map[bytes:5 text:given]" {
		t.Fatalf("a's data %+v, want the case's", a)
	}
}

func states(res *wfapi.Result) string {
	var parts []string
	for _, s := range res.Steps {
		parts = append(parts, s.ID+"="+string(s.Status))
	}
	return strings.Join(parts, " ")
}

// A case's order is the order the DAG starts steps in: an inline step the
// run starts with is not evaluated ahead under a plan test (found
// attacking issue 57: y seemed to start while x ran).
func TestOrderOfInlineSteps(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "ord.yaml")
	_ = os.WriteFile(plan, []byte(`name: ord
max_parallel: 1
steps:
  - {id: x, capability: file.write, with: {path: out/x.txt, content: "x", overwrite: true}}
  - {id: y, capability: text.render, with: {template: "y"}}
`), 0o644)
	s := prepareIn(t, dir, plan)
	out := s.run(&Case{Name: "x then y"}, 1)
	if out.err != nil || out.res == nil {
		t.Fatalf("run: %v", out.err)
	}
	if out.started["y"] <= out.ended["x"] || out.calls["y"] != 1 {
		t.Fatalf("y started at %d, x ended at %d; y called %d times", out.started["y"], out.ended["x"], out.calls["y"])
	}
}
