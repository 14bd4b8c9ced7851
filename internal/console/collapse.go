package console

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capflow/capflow/client"
)

// A plan of thousands of steps is drawn with its interchangeable steps as
// one node: steps with the same capability, tool and control flow, the
// same dependencies and the same dependents (a fan-out's branches). The
// page paints such a group by its members' states and counts.

// CollapseAbove is the plan size past which groups are drawn.
const CollapseAbove = 300

// minGroup is the fewest steps drawn as a group.
const minGroup = 4

// Collapsed is a graph as drawn: Groups maps a group's node id
// ("group-N") to its member steps, in plan order.
type Collapsed struct {
	Graph  *client.Graph       `json:"-"`
	Groups map[string][]string `json:"groups"`
}

// Collapse groups a large graph's interchangeable steps (a small graph
// comes back as it is).
func Collapse(g *client.Graph) Collapsed {
	out := Collapsed{Graph: g, Groups: map[string][]string{}}
	if len(g.Steps) <= CollapseAbove {
		return out
	}
	dependents := map[string][]string{}
	for _, s := range g.Steps {
		for _, d := range s.Deps {
			dependents[d] = append(dependents[d], s.ID)
		}
	}
	byKey := map[string][]int{}
	var keys []string
	for i, s := range g.Steps {
		k := fmt.Sprint(s.Capability, "|", s.Tool, "@", s.Version, "|", s.ForEach, s.When, s.Plan, s.Approval, "|", sorted(s.Deps), "|", sorted(dependents[s.ID]))
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	drawn := map[string]string{} // step -> its node
	var steps []client.GraphStep
	for _, k := range keys {
		idx := byKey[k]
		if len(idx) < minGroup {
			for _, i := range idx {
				drawn[g.Steps[i].ID] = g.Steps[i].ID
				steps = append(steps, g.Steps[i])
			}
			continue
		}
		id := fmt.Sprintf("group-%d", len(out.Groups)+1)
		first := g.Steps[idx[0]]
		node := first
		node.ID = id
		for _, i := range idx {
			out.Groups[id] = append(out.Groups[id], g.Steps[i].ID)
			drawn[g.Steps[i].ID] = id
		}
		steps = append(steps, node)
	}
	for i := range steps {
		steps[i].Deps, steps[i].Data = mapped(steps[i].Deps, drawn), mapped(steps[i].Data, drawn)
	}
	out.Graph = &client.Graph{Plan: g.Plan, Steps: steps, Omitted: g.Omitted}
	return out
}

func sorted(ids []string) string { c := slices.Clone(ids); slices.Sort(c); return strings.Join(c, ",") }

// mapped names the nodes the ids are drawn as, each once.
func mapped(ids []string, drawn map[string]string) []string {
	var out []string
	for _, id := range ids {
		if n := drawn[id]; n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
