package workflows

import (
	"slices"
	"testing"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/wfapi"
)

// The graph query answers the run's resolved plan: steps, tools, edges,
// and which edges carry data.
func TestGraphQuery(t *testing.T) {
	src := "name: g\nsteps:\n  - {id: a, capability: x.a}\n  - {id: b, capability: x.b, needs: [a]}\n  - {id: c, capability: x.c, with: {v: '${steps.a.data.x}'}, needs: [b], when: 'steps.b.success'}\n"
	f := &fakes{resolved: resolvedFrom(t, src), calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}, behave: map[string]behaviour{}}
	env := newEnv(t, f)
	env.ExecuteWorkflow(wfapi.WorkflowType, wfapi.Input{Plan: map[string]any{"name": "g"}})
	v, err := env.QueryWorkflow(client.GraphQuery)
	if err != nil {
		t.Fatal(err)
	}
	var g client.Graph
	if err := v.Get(&g); err != nil {
		t.Fatal(err)
	}
	if g.Plan != "g" || len(g.Steps) != 3 {
		t.Fatalf("graph %+v", g)
	}
	v, err = env.QueryWorkflow(client.StatesQuery)
	var states []client.StepState
	if err != nil || v.Get(&states) != nil || len(states) != 3 || states[2] != client.StepSucceeded {
		t.Fatalf("states %v %v", states, err)
	}
	c := g.Steps[2]
	if c.ID != "c" || c.Tool != "tool-c" || !slices.Equal(c.Deps, []string{"a", "b"}) || !slices.Equal(c.Data, []string{"a"}) || c.When != "steps.b.success" {
		t.Fatalf("step c: %+v", c)
	}
}
