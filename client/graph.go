package client

import "context"

// Graph is the run's plan as resolved (empty before it is resolved), read
// in pages when it is large.
func (r *Run) Graph(ctx context.Context) (*Graph, error) {
	var g Graph
	if err := r.query(ctx, GraphQuery, nil, &g); err != nil {
		return nil, err
	}
	for g.Omitted > 0 {
		var page Graph
		if err := r.query(ctx, GraphPageQuery, len(g.Steps), &page); err != nil || len(page.Steps) == 0 {
			return &g, nil // a worker from before pages: what it answers
		}
		g.Steps, g.Omitted = append(g.Steps, page.Steps...), page.Omitted
	}
	return &g, nil
}

// States is every step's state now, in the order of Graph.Steps, read in
// pages when the plan is large.
func (r *Run) States(ctx context.Context) ([]StepState, error) {
	var out []StepState
	if err := r.query(ctx, StatesQuery, nil, &out); err != nil {
		return nil, err
	}
	for len(out) > 0 && len(out)%MaxGraphPage == 0 {
		var page []StepState
		if err := r.query(ctx, StatesPageQuery, len(out), &page); err != nil || len(page) == 0 {
			break
		}
		out = append(out, page...)
	}
	return out, nil
}

// query asks the run's workflow; arg nil: no argument.
func (r *Run) query(ctx context.Context, name string, arg any, v any) error {
	var args []any
	if arg != nil {
		args = []any{arg}
	}
	val, err := r.c.tc.QueryWorkflow(ctx, r.ID, r.RunID, name, args...)
	if err != nil {
		return notFound("run", r.ID, err)
	}
	return val.Get(v)
}
