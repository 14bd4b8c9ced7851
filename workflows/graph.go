package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/wfapi"
)

// registerGraph answers the graph and states queries (the console draws
// and paints a run's plan from them; any client may ask).
func registerGraph(ctx workflow.Context, sched **scheduler) error {
	err := workflow.SetQueryHandler(ctx, client.GraphQuery, func() (*client.Graph, error) {
		if *sched == nil {
			return &client.Graph{Steps: []client.GraphStep{}}, nil
		}
		return wfapi.GraphOf((*sched).rr), nil
	})
	if err != nil {
		return err
	}
	return workflow.SetQueryHandler(ctx, client.StatesQuery, func() ([]client.StepState, error) {
		if *sched == nil {
			return []client.StepState{}, nil
		}
		s := *sched
		steps := s.rr.Steps[:min(len(s.rr.Steps), wfapi.MaxGraphSteps)]
		out := make([]client.StepState, 0, len(steps))
		for _, rs := range steps {
			out = append(out, s.status(rs.ID))
		}
		return out, nil
	})
}
