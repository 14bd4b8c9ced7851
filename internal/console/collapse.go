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

// CollapseAbove is the plan size past which groups of minGroup and
// chains are drawn.
const CollapseAbove = 300

// minGroup is the fewest steps drawn as a group in a large plan.
const minGroup = 4

// FanOutGroup is the fewest interchangeable steps drawn as a group in a
// plan of any size: a fan-out of 300 is one node, not a rank 78,000 px
// wide.
const FanOutGroup = 12

// Collapsed is a graph as drawn: Groups maps a group's node id
// ("group:N", or "chain:N" for a chain: a colon no step id has) to its member steps, in plan order.
type Collapsed struct {
	Graph  *client.Graph       `json:"-"`
	Groups map[string][]string `json:"groups"`
	// Opened are the groups a person opened: their steps are drawn one by
	// one, as a block (Dot).
	Opened map[string][]string `json:"-"`
}

// Collapse groups a graph's interchangeable steps: FanOutGroup or more at
// any size, minGroup or more (and chains) in a large graph; a graph with
// none comes back as it is. The groups and chains named in expanded are
// drawn step by step (a person opened them); the others keep their ids.
func Collapse(g *client.Graph, expanded ...string) Collapsed {
	out := Collapsed{Graph: g, Groups: map[string][]string{}, Opened: map[string][]string{}}
	open := map[string]bool{}
	for _, id := range expanded {
		open[id] = true
	}
	large := len(g.Steps) > CollapseAbove
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
	n := 0
	for _, k := range keys {
		idx := byKey[k]
		grouped := len(idx) >= FanOutGroup || (large && len(idx) >= minGroup)
		if grouped {
			n++ // numbered whether drawn or opened: the others keep their ids
		}
		id := fmt.Sprintf("group:%d", n)
		if !grouped || open[id] {
			for _, i := range idx {
				if grouped {
					out.Opened[id] = append(out.Opened[id], g.Steps[i].ID)
				}
				drawn[g.Steps[i].ID] = g.Steps[i].ID
				steps = append(steps, g.Steps[i])
			}
			continue
		}
		first := g.Steps[idx[0]]
		node := first
		node.ID = id
		for _, i := range idx {
			out.Groups[id] = append(out.Groups[id], g.Steps[i].ID)
			drawn[g.Steps[i].ID] = id
		}
		steps = append(steps, node)
	}
	if n == 0 && !large {
		return out
	}
	for i := range steps {
		steps[i].Deps, steps[i].Data = mapped(steps[i].Deps, drawn), mapped(steps[i].Data, drawn)
	}
	if large {
		steps = chains(out.Groups, steps, open)
	}
	out.Graph = &client.Graph{Plan: g.Plan, Steps: steps, Omitted: g.Omitted}
	return out
}

// chains draws a long run of steps that each wait for the one before (and
// only for it), of the same capability and control flow, as one node
// ("chain:N"): a chain of 2,500 renders is a node, not 2,500 ranks. Groups
// are left as they are.
func chains(groups map[string][]string, steps []client.GraphStep, open map[string]bool) []client.GraphStep {
	dependents := map[string][]int{}
	for i, s := range steps {
		for _, d := range s.Deps {
			dependents[d] = append(dependents[d], i)
		}
	}
	alike := func(a, b client.GraphStep) bool {
		return a.Capability == b.Capability && a.Tool == b.Tool && a.Version == b.Version && a.ForEach == b.ForEach &&
			a.When == b.When && a.Plan == b.Plan && a.Approval == b.Approval
	}
	// next[i] is the step that follows step i in a chain.
	next, follows := map[int]int{}, map[int]bool{}
	for i, s := range steps {
		ds := dependents[s.ID]
		if len(ds) != 1 || groups[s.ID] != nil {
			continue
		}
		n := steps[ds[0]]
		if len(n.Deps) == 1 && groups[n.ID] == nil && alike(s, n) {
			next[i], follows[ds[0]] = ds[0], true
		}
	}
	drawn, grouped, n := make(map[string]string, len(steps)), false, 0
	for _, s := range steps {
		drawn[s.ID] = s.ID
	}
	for i := range steps {
		if follows[i] {
			continue
		}
		members := []string{steps[i].ID}
		for j, ok := next[i]; ok; j, ok = next[j] {
			members = append(members, steps[j].ID)
		}
		if len(members) < minGroup {
			continue
		}
		n++
		id := fmt.Sprintf("chain:%d", n)
		if open[id] {
			continue
		}
		groups[id], grouped = members, true
		for _, m := range members {
			drawn[m] = id
		}
	}
	if !grouped {
		return steps
	}
	out := steps[:0:0]
	for _, s := range steps {
		id := drawn[s.ID]
		switch {
		case id == s.ID:
		case groups[id][0] == s.ID:
			s.ID = id // the chain's node, where its first step was
		default:
			continue
		}
		out = append(out, s)
	}
	for i := range out {
		out[i].Deps, out[i].Data = mapped(out[i].Deps, drawn), mapped(out[i].Data, drawn)
	}
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
