package workflows

import (
	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
	"go.temporal.io/sdk/workflow"
)

// MaxGraphSteps bounds the steps the graph query answers (a query's answer
// travels in one gRPC message).
const MaxGraphSteps = 10000

// registerGraph answers the graph and states queries (the console draws
// and paints a run's plan from them; any client may ask).
func registerGraph(ctx workflow.Context, sched **scheduler) error {
	err := workflow.SetQueryHandler(ctx, client.GraphQuery, func() (*client.Graph, error) {
		if *sched == nil {
			return &client.Graph{Steps: []client.GraphStep{}}, nil
		}
		return graphOf((*sched).rr), nil
	})
	if err != nil {
		return err
	}
	return workflow.SetQueryHandler(ctx, client.StatesQuery, func() ([]client.StepState, error) {
		if *sched == nil {
			return []client.StepState{}, nil
		}
		return statesOf(*sched), nil
	})
}

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

// statesOf is every step's state, in the graph's order.
func statesOf(s *scheduler) []client.StepState {
	out := make([]client.StepState, 0, min(len(s.rr.Steps), MaxGraphSteps))
	for i, rs := range s.rr.Steps {
		if i == MaxGraphSteps {
			break
		}
		out = append(out, s.status(rs.ID))
	}
	return out
}
