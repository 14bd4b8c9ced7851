package workflows

import (
	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

// MaxGraphSteps bounds the steps the graph query answers (a query's answer
// travels in one gRPC message).
const MaxGraphSteps = 10000

// graphOf is the run's resolved plan as the graph query answers it.
func graphOf(rr *wfapi.ResolveResult) *client.Graph {
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
