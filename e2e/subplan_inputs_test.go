package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// A sub-plan fed inputs past 256 KB gets them by reference, both ways they
// are evaluated: in the workflow (three 200 KB outputs in history) and by
// the Decide activity (an output stored in a file). The child loads them
// from its parent's folder; no child start in history passes 512 KB.
func TestLargeSubPlanInputsTravelByReference(t *testing.T) {
	h.writePlan(t, "echo-sub", `name: echo-sub
inputs: {text: {type: string}}
outputs: {bytes: "${steps.echo.data.bytes}"}
steps:
  - {id: echo, capability: test.render, with: {template: "${inputs.text}"}}
`)
	small, big := strings.Repeat("s", 200<<10), strings.Repeat("b", 300<<10)
	file := h.writePlan(t, "large-sub-inputs", `name: large-sub-inputs
steps:
  - {id: p1, capability: test.render, with: {template: "`+small+`"}}
  - {id: p2, capability: test.render, with: {template: "`+small+`"}}
  - {id: p3, capability: test.render, with: {template: "`+small+`"}}
  - {id: stored, capability: test.render, with: {template: "`+big+big+`"}}
  - {id: inline, plan: e2e-plans/echo-sub.yaml, with: {text: "${steps.p1.data.text}${steps.p2.data.text}${steps.p3.data.text}"}}
  - {id: decided, plan: e2e-plans/echo-sub.yaml, with: {text: "${steps.stored.data.text}"}}
`)
	code, env, stderr := h.capflow(t, "run", file, "--id", "e2e-large-sub-inputs")
	var r runResult
	data(t, env, &r)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s\n%s", code, r.Status, r.Message, stderr)
	}
	for id, want := range map[string]int{"inline": 600 << 10, "decided": 600 << 10} {
		s := r.step(t, id)
		if s.Child == nil || s.Child.Status != "passed" || s.Envelope == nil || fmt.Sprint(s.Envelope.Data) != fmt.Sprintf("map[bytes:%d]", want) {
			t.Fatalf("%s: %+v", id, s)
		}
		it := h.client.GetWorkflowHistory(context.Background(), s.Child.WorkflowID, "", false, 0)
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		in := ev.GetWorkflowExecutionStartedEventAttributes().GetInput()
		if n := proto.Size(in); n > 512<<10 || !strings.Contains(in.String(), "parent_inputs") {
			t.Fatalf("%s: the child started with a %d KB input", id, n>>10)
		}
	}
	if n := payloadWarnings(t); n > 0 {
		t.Fatalf("%d payload warnings in the worker log", n)
	}
	recordHistory(t, "e2e-large-sub-inputs", "child-inputs")
	recordHistory(t, r.step(t, "decided").Child.WorkflowID, "child-inputs-child")
}
