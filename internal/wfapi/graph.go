package wfapi

import (
	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/plan"
)

// MaxGraphSteps bounds the steps a graph answers (a query's answer travels
// in one gRPC message).
const MaxGraphSteps = 10000

// GraphOf is a resolved plan as the graph query answers it (and the
// console draws an ended run from its report.json the same way).
func GraphOf(rr *ResolveResult) *client.Graph {
	g := &client.Graph{Plan: rr.Plan, Steps: []client.GraphStep{}}
	for i, rs := range rr.Steps {
		if i == MaxGraphSteps {
			g.Omitted = len(rr.Steps) - i
			break
		}
		gs := client.GraphStep{ID: rs.ID, Capability: rs.Capability, Tool: rs.Tool, Version: rs.Version, Deps: rs.Deps,
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
