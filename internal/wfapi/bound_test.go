package wfapi

import (
	"fmt"
	"testing"

	"github.com/capflow/capflow/wire"
)

func TestBoundKeepsTheFirstAndCountsTheRest(t *testing.T) {
	list := func(n int) ([]wire.Gap, []wire.Problem, []wire.Violation) {
		var g []wire.Gap
		var p []wire.Problem
		var v []wire.Violation
		for i := 0; i < n; i++ {
			g = append(g, wire.Gap{StepID: fmt.Sprint(i)})
			p = append(p, wire.Problem{Field: fmt.Sprint(i)})
			v = append(v, wire.Violation{StepID: fmt.Sprint(i)})
		}
		return g, p, v
	}
	for _, c := range []struct {
		name                string
		gaps, probs, viols  int
		wantCut             bool
		keptG, keptP, keptV int
		omitG, omitP, omitV int
	}{
		{"all fit", MaxListed, 3, MaxListed, false, MaxListed, 3, MaxListed, 0, 0, 0},
		{"gaps past the bound", MaxListed + 50, 3, 0, true, MaxListed, 3, 0, 50, 0, 0},
		{"every list past it", 250, 101, 120, true, MaxListed, MaxListed, MaxListed, 150, 1, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _, _ := list(c.gaps)
			_, p, _ := list(c.probs)
			_, _, v := list(c.viols)
			pol := &wire.PolicyReport{Violations: v}
			rr := &ResolveResult{Gaps: g, Problems: p, Policy: pol}
			full := rr.Bound("/runs/x/preflight.json")
			if (full != nil) != c.wantCut {
				t.Fatalf("cut: %v, want %v", full != nil, c.wantCut)
			}
			if len(rr.Gaps) != c.keptG || len(rr.Problems) != c.keptP || len(rr.Policy.Violations) != c.keptV {
				t.Fatalf("kept %d/%d/%d", len(rr.Gaps), len(rr.Problems), len(rr.Policy.Violations))
			}
			if !c.wantCut {
				if rr.Omitted != nil {
					t.Fatalf("omitted %+v", rr.Omitted)
				}
				return
			}
			if om := rr.Omitted; om == nil || om.Gaps != c.omitG || om.Problems != c.omitP || om.Violations != c.omitV || om.File != "/runs/x/preflight.json" {
				t.Fatalf("omitted %+v", rr.Omitted)
			}
			if len(full.Gaps) != c.gaps || len(full.Problems) != c.probs || len(full.Violations) != c.viols {
				t.Fatalf("full lists %d/%d/%d", len(full.Gaps), len(full.Problems), len(full.Violations))
			}
			if len(pol.Violations) != c.viols {
				t.Fatal("Bound changed the caller's policy report")
			}
			if rr.Gaps[0].StepID != "0" || (c.keptP > 0 && rr.Problems[len(rr.Problems)-1].Field != fmt.Sprint(c.keptP-1)) {
				t.Fatal("the first entries are not the ones kept")
			}
		})
	}
}
