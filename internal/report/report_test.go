package report

import (
	"strings"
	"testing"

	"github.com/capflow/capflow/wire"
)

// A failed run's report says what to do next near its top, before the
// graph and the steps.
func TestMarkdownSaysWhatNext(t *testing.T) {
	r := wire.Result{Plan: "p", Status: wire.StatusFailed, Steps: []wire.StepResult{{ID: "build", Status: wire.StepFailed}},
		Next: []wire.Next{{Step: "build", Code: "TOOL_FAILURE", Severity: "HIGH", Command: "capflow rerun r1 --from build", Advice: "read the stderr tail", Stderr: []string{"x", "boom"}}}}
	md := Markdown(Document{Result: r})
	want := "\n## What next\n\n- **build** `TOOL_FAILURE` HIGH: `capflow rerun r1 --from build`; read the stderr tail\n  ```\n  x\n  boom\n  ```\n"
	i := strings.Index(md, want)
	if i < 0 || i > strings.Index(md, "## Steps") {
		t.Fatalf("want before the steps:\n%s\n---\n%s", want, md)
	}
}
