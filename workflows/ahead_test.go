package workflows

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// A batch of inline steps evaluates the inline steps that follow it
// (ahead.go): a chain is one batch, and a step takes an outcome evaluated
// ahead only when it starts with the input it was evaluated with.
func TestInlineStepsAhead(t *testing.T) {
	const chain = `name: chain
steps:
  - {id: a, capability: x.a}
  - {id: b, capability: x.b, needs: [a], with: {n: "${steps.a.data.n}"}}
  - {id: c, capability: x.c, needs: [b], with: {n: "${steps.b.data.n}", ok: "${steps.b.success}"}}
  - {id: d, capability: x.d, needs: [c], with: {n: "${steps.c.data.n}", first: "${steps.a.data.n}"}}
`
	for _, tc := range []struct {
		name     string
		plan     string
		alter    func(rr *wfapi.ResolveResult)
		local    string   // a step that runs as a local activity (declined by its batch, or not inline): its n is 1
		dN       string   // d's n (0: 4)
		wrongKey string   // a step whose outcome ahead is keyed wrong
		first    bool     // Resolve evaluates ahead (baseline 4)
		want     []string // the batches: their steps, then "+" those evaluated ahead
	}{
		{name: "a chain is one batch", plan: chain, want: []string{"a+b,c,d"}},
		{name: "an outcome keyed to other input is not taken", plan: chain, wrongKey: "c", want: []string{"a+b,c,d", "c+d"}},
		{name: "a declined step's followers wait for it", plan: chain, local: "a", want: []string{"a+b,c,d", "b+c,d"}},
		{name: "a condition is the workflow's", plan: strings.Replace(chain, "needs: [b]", "needs: [b], when: steps.b.success", 1),
			want: []string{"a+b", "c+d"}},
		{name: "a step with effects runs when it starts", plan: chain,
			alter: func(rr *wfapi.ResolveResult) { rr.Steps[2].Idempotent = false }, want: []string{"a+b", "c+d"}},
		{name: "a step that is not inline is not followed", plan: chain,
			alter: func(rr *wfapi.ResolveResult) { rr.Steps[1].Inline = false }, local: "b", dN: "3", want: []string{"a", "c+d"}},
		// Baseline 4: Resolve evaluates the steps the run starts with, and
		// those that follow them (step.FirstFollowers), with the input the
		// workflow then builds.
		{name: "Resolve evaluates a chain", plan: chain, first: true},
		{name: "Resolve's outcome keyed to other input is not taken", plan: chain, first: true, wrongKey: "c", want: []string{"c+d"}},
		{name: "Resolve evaluates up to a step that is not inline", plan: chain, first: true,
			alter: func(rr *wfapi.ResolveResult) { rr.Steps[2].Inline = false }, local: "c", dN: "2", want: []string{"d"}},
		{name: "Resolve evaluates the run's inputs as the workflow reads them", plan: "inputs: {v: {type: number, default: 9007199254740993}, w: {type: object, default: {k: [1, 2]}}}\n" +
			strings.Replace(chain, "capability: x.a}", `capability: x.a, with: {v: "${inputs.v}", w: "${inputs.w}"}}`, 1), first: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := resolvedFrom(t, tc.plan)
			for i := range rr.Steps {
				rr.Steps[i].Local, rr.Steps[i].Inline = true, true
			}
			if tc.alter != nil {
				tc.alter(rr)
			}
			f := &fakes{resolved: rr, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}, behave: map[string]behaviour{
				// A declined step's local activity counts as the batch would.
				tc.local: func(context.Context, int32) (*wfapi.RunToolResult, error) { return counted(wfapi.RunToolInput{}), nil },
			}}
			var mu sync.Mutex
			var batches []string
			// evaluate is the followers' part of a batch, wrong on the first.
			evaluate := func(follow []wfapi.InlineFollow, done map[string]*wfapi.RunToolResult) (ahead []wfapi.InlineAhead) {
				for _, fl := range follow {
					call, ok := fl.Filled(done)
					if !ok {
						continue
					}
					r := counted(call)
					key := wfapi.InlineKey(call)
					if call.Step.ID == tc.wrongKey && len(batches) == 0 {
						key = "other"
					}
					ahead = append(ahead, wfapi.InlineAhead{ID: call.Step.ID, Key: key, InlineOutcome: wfapi.InlineOutcome{OK: true, Result: r, Size: 100}})
					done[call.Step.ID] = r
				}
				return ahead
			}
			if tc.first {
				f.first = func(rr *wfapi.ResolveResult) []wfapi.InlineAhead {
					return evaluate(step.FirstFollowers(rr.Steps, rr.Inputs, wfapi.DefaultInlineBatch), map[string]*wfapi.RunToolResult{})
				}
			}
			eval := func(calls []wfapi.RunToolInput, follow []wfapi.InlineFollow) wfapi.InlineBatch {
				var b wfapi.InlineBatch
				done := map[string]*wfapi.RunToolResult{}
				var ids, ahead []string
				for _, in := range calls {
					ids = append(ids, in.Step.ID)
					o := wfapi.InlineOutcome{}
					if in.Step.ID != tc.local {
						o = wfapi.InlineOutcome{OK: true, Result: counted(in), Size: 100}
						done[in.Step.ID] = o.Result
					}
					b.Outcomes = append(b.Outcomes, o)
				}
				for _, fl := range follow {
					ahead = append(ahead, fl.Call.Step.ID)
				}
				b.Ahead = evaluate(follow, done)
				mu.Lock()
				defer mu.Unlock()
				s := strings.Join(ids, ",")
				if len(ahead) > 0 {
					s += "+" + strings.Join(ahead, ",")
				}
				batches = append(batches, s)
				return b
			}
			env := aheadEnv(eval, f)
			env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "x"}})
			var res wfapi.Result
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Status != wfapi.StatusPassed || !slices.Equal(batches, tc.want) {
				t.Fatalf("%s: batches %q, want %q", res.Status, batches, tc.want)
			}
			for _, st := range res.Steps {
				want := PathInline
				if st.ID == tc.local {
					want = PathLocal
				}
				if st.Execution != want || st.Status != wfapi.StepSucceeded {
					t.Errorf("step %s %s, ran %q (want %q)", st.ID, st.Status, st.Execution, want)
				}
			}
			// Each step counted one on from what it read.
			if n, want := res.Steps[3].Envelope.Data, "map[n:"+cmp.Or(tc.dN, "4")+"]"; fmt.Sprint(n) != want {
				t.Errorf("d's data %v, want %s", n, want)
			}
		})
	}
}

// counted is a step's result: its data's n one more than the largest n
// among the steps it reads (1 for none).
func counted(in wfapi.RunToolInput) *wfapi.RunToolResult {
	n := 0.0
	for _, d := range in.Deps {
		if m, ok := d.Data.(map[string]any); ok {
			if v, ok := m["n"].(float64); ok && v > n {
				n = v
			}
		}
	}
	env := envelope.NewBuilder(in.Step.Tool).Succeed("ok", map[string]any{"n": n + 1})
	return &wfapi.RunToolResult{Envelope: env, Attempt: 1}
}
