package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// registerGraph answers the graph and states queries (the console draws
// and paints a run's plan from them; any client may ask): the first
// wfapi.MaxGraphSteps steps, or a page of them from a step on.
func registerGraph(ctx workflow.Context, sched **scheduler) error {
	graph := func(from int) (*wire.Graph, error) {
		if *sched == nil {
			return &wire.Graph{Steps: []wire.GraphStep{}}, nil
		}
		return wfapi.GraphPage((*sched).rr, from, wfapi.MaxGraphSteps), nil
	}
	states := func(from int) ([]wire.StepState, error) {
		if *sched == nil {
			return []wire.StepState{}, nil
		}
		s := *sched
		from = min(max(from, 0), len(s.rr.Steps))
		steps := s.rr.Steps[from:min(len(s.rr.Steps), from+wfapi.MaxGraphSteps)]
		out := make([]wire.StepState, 0, len(steps))
		for _, rs := range steps {
			out = append(out, s.status(rs.ID))
		}
		return out, nil
	}
	for _, q := range []struct {
		name string
		f    any
	}{
		{wire.GraphQuery, func() (*wire.Graph, error) { return graph(0) }}, {wire.GraphPageQuery, graph},
		{wire.StatesQuery, func() ([]wire.StepState, error) { return states(0) }}, {wire.StatesPageQuery, states},
	} {
		if err := workflow.SetQueryHandler(ctx, q.name, q.f); err != nil {
			return err
		}
	}
	return nil
}
