package client

import "context"

// GraphQuery answers a run's plan as resolved: its steps and their edges
// (what the console draws; any client may ask).
const GraphQuery = "graph"

// StatesQuery answers every step's state now, in the graph's step order:
// what the console paints a large plan from (the progress answer of a run
// of thousands of steps leaves the succeeded and pending ones out).
const StatesQuery = "states"

// GraphPageQuery and StatesPageQuery answer the same from a step on (an
// argument: its index): a plan past one answer's bound is read in pages.
const (
	GraphPageQuery  = "graph-page"
	StatesPageQuery = "states-page"
)

// Graph is a run's plan as a graph.
type Graph struct {
	Plan  string      `json:"plan"`
	Steps []GraphStep `json:"steps"`
	// Omitted counts steps left out of a plan too large to answer whole.
	Omitted int `json:"omitted,omitempty"`
}

// GraphStep is one step: what it runs and what it waits for.
type GraphStep struct {
	ID         string `json:"id"`
	Capability string `json:"capability,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Version    string `json:"version,omitempty"`
	// Deps are every step it waits for; Data those whose output it reads
	// (the others it only `needs`).
	Deps []string `json:"deps,omitempty"`
	Data []string `json:"data,omitempty"`
	// ForEach, When, Plan and Approval: its control flow.
	ForEach  bool   `json:"for_each,omitempty"`
	When     string `json:"when,omitempty"`
	Plan     string `json:"plan,omitempty"`
	Approval bool   `json:"approval,omitempty"`
}

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

// MaxGraphPage is how many steps one answer of the graph and states
// queries carries (a query's answer travels in one gRPC message).
const MaxGraphPage = 10000

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
