package workflows

import (
	"fmt"
	"slices"
	"testing"

	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// The graph query answers the run's resolved plan: steps, tools, edges,
// and which edges carry data.
func TestGraphQuery(t *testing.T) {
	src := "name: g\nsteps:\n  - {id: a, capability: x.a}\n  - {id: b, capability: x.b, needs: [a]}\n  - {id: c, capability: x.c, with: {v: '${steps.a.data.x}'}, needs: [b], when: 'steps.b.success'}\n"
	f := &fakes{resolved: resolvedFrom(t, src), calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}, behave: map[string]behaviour{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "g"}})
	v, err := env.QueryWorkflow(wire.GraphQuery)
	if err != nil {
		t.Fatal(err)
	}
	var g wire.Graph
	if err := v.Get(&g); err != nil {
		t.Fatal(err)
	}
	if g.Plan != "g" || len(g.Steps) != 3 {
		t.Fatalf("graph %+v", g)
	}
	v, err = env.QueryWorkflow(wire.StatesQuery)
	var states []wire.StepState
	if err != nil || v.Get(&states) != nil || len(states) != 3 || states[2] != wire.StepSucceeded {
		t.Fatalf("states %v %v", states, err)
	}
	c := g.Steps[2]
	if c.ID != "c" || c.Tool != "tool-c" || !slices.Equal(c.Deps, []string{"a", "b"}) || !slices.Equal(c.Data, []string{"a"}) || c.When != "steps.b.success" {
		t.Fatalf("step c: %+v", c)
	}
	// A page from a step on: the graph's and the states' (a plan past one
	// answer is read so).
	v, err = env.QueryWorkflow(wire.GraphPageQuery, 1)
	var page wire.Graph
	if err != nil || v.Get(&page) != nil || len(page.Steps) != 2 || page.Steps[0].ID != "b" || page.Omitted != 0 {
		t.Fatalf("graph page from 1: %+v %v", page, err)
	}
	v, err = env.QueryWorkflow(wire.StatesPageQuery, 2)
	if err != nil || v.Get(&states) != nil || len(states) != 1 || states[0] != wire.StepSucceeded {
		t.Fatalf("states page from 2: %v %v", states, err)
	}
}

// A graph page says how many steps follow it.
func TestGraphPages(t *testing.T) {
	rr := &wfapi.ResolveResult{Plan: "p"}
	for i := 0; i < 25; i++ {
		rr.Steps = append(rr.Steps, wfapi.ResolvedStep{ID: fmt.Sprintf("s%02d", i)})
	}
	for _, c := range []struct{ from, n, first, len, omitted int }{{0, 10, 0, 10, 15}, {10, 10, 10, 10, 5}, {20, 10, 20, 5, 0}, {30, 10, -1, 0, 0}, {-5, 3, 0, 3, 22}} {
		g := wfapi.GraphPage(rr, c.from, c.n)
		first := -1
		if len(g.Steps) > 0 {
			fmt.Sscanf(g.Steps[0].ID, "s%d", &first)
		}
		if len(g.Steps) != c.len || g.Omitted != c.omitted || first != c.first {
			t.Errorf("page %d+%d: %d steps from %d, %d omitted", c.from, c.n, len(g.Steps), first, g.Omitted)
		}
	}
	if g := wfapi.GraphOf(rr); len(g.Steps) != 25 || g.Omitted != 0 {
		t.Errorf("the whole graph: %d steps, %d omitted", len(g.Steps), g.Omitted)
	}
}
