package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/wfapi"
)

// registerGraph answers the graph and states queries (the console draws
// and paints a run's plan from them; any client may ask): the first
// wfapi.MaxGraphSteps steps, or a page of them from a step on.
func registerGraph(ctx workflow.Context, sched **scheduler) error {
	graph := func(from int) (*client.Graph, error) {
		if *sched == nil {
			return &client.Graph{Steps: []client.GraphStep{}}, nil
		}
		return wfapi.GraphPage((*sched).rr, from, wfapi.MaxGraphSteps), nil
	}
	states := func(from int) ([]client.StepState, error) {
		if *sched == nil {
			return []client.StepState{}, nil
		}
		s := *sched
		from = min(max(from, 0), len(s.rr.Steps))
		steps := s.rr.Steps[from:min(len(s.rr.Steps), from+wfapi.MaxGraphSteps)]
		out := make([]client.StepState, 0, len(steps))
		for _, rs := range steps {
			out = append(out, s.status(rs.ID))
		}
		return out, nil
	}
	for _, q := range []struct {
		name string
		f    any
	}{
		{client.GraphQuery, func() (*client.Graph, error) { return graph(0) }}, {client.GraphPageQuery, graph},
		{client.StatesQuery, func() ([]client.StepState, error) { return states(0) }}, {client.StatesPageQuery, states},
	} {
		if err := workflow.SetQueryHandler(ctx, q.name, q.f); err != nil {
			return err
		}
	}
	return nil
}
