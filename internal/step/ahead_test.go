package step

import (
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/wfapi"
)

// An inline step's inputs are bounded once their references are filled
// in: one large input many references share counts each time (found
// attacking issue 57: 9,000 references to a 40 KB input took Resolve 3 s
// and 1.5 GB to digest).
func TestSmallerThan(t *testing.T) {
	big := strings.Repeat("x", 40<<10)
	shared := make([]any, 9000)
	for i := range shared {
		shared[i] = big
	}
	for _, tc := range []struct {
		name  string
		v     any
		limit int
		want  bool
	}{
		{"a string under", "abc", 10, true},
		{"a string over", "abcdefghijk", 10, false},
		{"shared references", map[string]any{"xs": shared}, maxInlineInputs, false},
		{"a few of them", map[string]any{"xs": shared[:10]}, maxInlineInputs, true},
		{"numbers and keys", map[string]any{"a": 1.5, "b": []any{true, nil}}, 64, true},
		{"many small values", make([]any, 100), 64, false},
	} {
		if got := smallerThan(tc.v, tc.limit); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

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
