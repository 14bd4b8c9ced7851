package wfapi

import (
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/wire"
)

// MaxGraphSteps bounds the steps one answer of the graph or states query
// carries (a query's answer travels in one gRPC message): a larger plan
// is read in pages (wire.GraphPageQuery).
const MaxGraphSteps = wire.MaxGraphPage

// GraphOf is a resolved plan's whole graph (an ended run's, from its
// report).
func GraphOf(rr *ResolveResult) *wire.Graph { return GraphPage(rr, 0, len(rr.Steps)) }

// GraphPage is steps [from, from+n) of a resolved plan's graph; Omitted
// counts the steps after them.
func GraphPage(rr *ResolveResult, from, n int) *wire.Graph {
	g := &wire.Graph{Plan: rr.Plan, Steps: []wire.GraphStep{}}
	from = min(max(from, 0), len(rr.Steps))
	to := min(len(rr.Steps), from+max(n, 0))
	g.Omitted = len(rr.Steps) - to
	for _, rs := range rr.Steps[from:to] {
		gs := wire.GraphStep{ID: rs.ID, Capability: rs.Capability, Tool: rs.Tool, Version: rs.Version, Deps: rs.Deps,
			ForEach: rs.ForEach != nil, When: rs.When, Plan: rs.Plan, Approval: rs.Approval}
		read := map[string]bool{}
		plan.CollectRefs([]any{rs.With, rs.ForEach}, nil, func(_ []string, t plan.Template, _ error) {
			for _, r := range t.Refs() {
				if r.Kind == plan.RefSteps {
					read[r.Name] = true
				}
			}
		})
		for _, d := range rs.Deps {
			if read[d] {
				gs.Data = append(gs.Data, d)
			}
		}
		g.Steps = append(g.Steps, gs)
	}
	return g
}
