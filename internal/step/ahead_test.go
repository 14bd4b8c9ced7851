package step

import (
	"testing"

	"github.com/capflow/capflow/internal/wfapi"
)

// A plan test's stand-in tools evaluate nothing ahead: they count a step's
// calls, and their order, as the DAG starts it (found attacking issue 57:
// a step Resolve evaluated seemed to start before the one before it).
func TestGivenResultsAreNotEvaluatedAhead(t *testing.T) {
	rr := &wfapi.ResolveResult{Steps: []wfapi.ResolvedStep{{ID: "a", Tool: "t", Local: true, Inline: true, Idempotent: true}}}
	rr.InlineBatch = 8
	if len(FirstFollowers(rr.Steps, nil, rr.InlineBatch)) != 1 {
		t.Fatal("the step is not one to evaluate ahead")
	}
	e := &Executor{Given: true}
	if got := e.First(rr, "run"); got != nil {
		t.Fatalf("evaluated ahead: %+v", got)
	}
	if b := e.Inline(nil, []wfapi.InlineFollow{{Call: wfapi.RunToolInput{Step: wfapi.CallOf(rr.Steps[0])}}}, wfapi.InlineContext{Time: wfapi.InlineBatchTime, Bytes: 1 << 20}); len(b.Ahead) != 0 {
		t.Fatalf("a batch evaluated ahead: %+v", b.Ahead)
	}
}
