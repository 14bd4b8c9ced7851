package console

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/goccy/go-graphviz"

	"github.com/capflow/capflow/client"
)

// The graph is laid out by Graphviz's dot (go-graphviz: Graphviz built to
// WebAssembly, run in-process, so the console needs nothing installed).
// Every step is an SVG group with id "step-ID"; the page colours it by
// state. Edges of data a step reads are solid, of `needs` only dashed.

// Dot writes the graph in the dot language; groups (Collapse) are drawn
// with their size and first and last members, opened groups as a block
// of their steps in rows (a fan-out of 300 is not one rank 300 wide),
// whose shared edges are drawn once, to and from the block.
func Dot(c Collapsed) string {
	g := c.Graph
	var b strings.Builder
	b.WriteString("digraph plan {\n  rankdir=TB; nodesep=0.3; ranksep=0.45; compound=true;\n")
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#f3f4f6\", color=\"#9ca3af\", fontname=\"Helvetica\", fontsize=11];\n")
	b.WriteString("  edge [color=\"#6b7280\", arrowsize=0.7];\n")
	in := map[string]string{} // a step of an opened group -> the group
	for gid, members := range c.Opened {
		for _, m := range members {
			in[m] = gid
		}
	}
	for _, s := range g.Steps {
		if in[s.ID] == "" {
			node(&b, s, c.Groups[s.ID])
		}
	}
	for _, gid := range slices.Sorted(maps.Keys(c.Opened)) {
		block(&b, gid, c.Opened[gid], g)
	}
	drawn := map[string]bool{}
	for _, s := range g.Steps {
		for _, d := range s.Deps {
			edge(&b, c.Opened, in, d, s, drawn)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// node writes one step's (or a group's) node. Its last line is kept
// blank: the page writes the step's state mark there, where the layout
// made room for it.
func node(b *strings.Builder, s client.GraphStep, members []string) {
	l := label(s)
	if len(members) > 0 {
		form := "%d steps: %s … %s\n%s"
		if strings.HasPrefix(s.ID, "chain:") {
			form = "%d steps in a chain: %s → … → %s\n%s"
		}
		l = fmt.Sprintf(form, len(members), members[0], members[len(members)-1], l[strings.Index(l, "\n")+1:])
	}
	fmt.Fprintf(b, "  %s [id=%s, class=\"step\", label=%s];\n", quote(s.ID), quote("step-"+s.ID), quote(l+"\n"+markRoom))
}

// block writes an opened group's steps as a cluster of rows about as many
// as its columns, each row one rank.
func block(b *strings.Builder, gid string, members []string, g *client.Graph) {
	byID := make(map[string]client.GraphStep, len(members))
	for _, s := range g.Steps {
		byID[s.ID] = s
	}
	fmt.Fprintf(b, "  subgraph %s {\n  label=%s; style=\"rounded,dashed\"; color=\"#94a3b8\"; fontname=\"Helvetica\"; fontsize=11;\n",
		quote("cluster_"+gid), quote(fmt.Sprintf("%s: %d steps, drawn one by one", gid, len(members))))
	cols := int(math.Ceil(math.Sqrt(float64(len(members)))))
	for row := 0; row*cols < len(members); row++ {
		line := members[row*cols : min(len(members), (row+1)*cols)]
		for _, m := range line {
			node(b, byID[m], nil)
		}
		qs := make([]string, len(line))
		for i, m := range line {
			qs[i] = quote(m)
		}
		fmt.Fprintf(b, "  { rank=same; %s }\n", strings.Join(qs, "; "))
		if (row+1)*cols < len(members) {
			fmt.Fprintf(b, "  %s -> %s [style=invis];\n", quote(line[0]), quote(members[(row+1)*cols]))
		}
	}
	b.WriteString("  }\n")
}

// edge writes the edge from d to s: once for an opened group, from its
// last step or to its first, clipped at its block.
func edge(b *strings.Builder, opened map[string][]string, in map[string]string, d string, s client.GraphStep, drawn map[string]bool) {
	style := "solid"
	if !slices.Contains(s.Data, d) {
		style = "dashed"
	}
	from, to, attrs := d, s.ID, ""
	if gid := in[d]; gid != "" {
		from, attrs = opened[gid][len(opened[gid])-1], attrs+", ltail="+quote("cluster_"+gid)
	}
	if gid := in[s.ID]; gid != "" {
		to, attrs = opened[gid][0], attrs+", lhead="+quote("cluster_"+gid)
	}
	key := cmp.Or(in[d], d) + ">" + cmp.Or(in[s.ID], s.ID)
	if drawn[key] {
		return
	}
	drawn[key] = true
	fmt.Fprintf(b, "  %s -> %s [style=%s, class=%s%s];\n", quote(from), quote(to), style, quote("edge-"+style), attrs)
}

// quote is a dot string: UTF-8 as it is (Go's %q would write \u escapes,
// which dot prints as they are), quotes and backslashes escaped, line
// breaks as dot's \n.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "").Replace(s) + `"`
}

// markRoom is a node's blank last line (no-break spaces, which SVG keeps):
// room for a mark such as "✓1200 ✗12 of 2500".
var markRoom = strings.Repeat("\u00a0", 26)

// label is a node's text: its id, what it asks, what runs it, its control
// flow.
func label(s client.GraphStep) string {
	lines := []string{s.ID}
	switch {
	case s.Plan != "":
		lines = append(lines, "sub-plan "+s.Plan)
	case s.Tool != "":
		lines = append(lines, s.Capability+" → "+s.Tool+"@"+s.Version)
	default:
		lines = append(lines, s.Capability)
	}
	if s.ForEach {
		lines = append(lines, "for each item")
	}
	if s.When != "" {
		w := s.When
		if len(w) > 40 {
			w = w[:40] + "…"
		}
		lines = append(lines, "when "+w)
	}
	if s.Approval {
		lines = append(lines, "waits for a person")
	}
	return strings.Join(lines, "\n")
}

// layout runs dot; one at a time (a Graphviz context is not safe for
// concurrent use).
var layoutMu sync.Mutex

// SVG lays a collapsed graph out.
func SVG(ctx context.Context, c Collapsed) ([]byte, error) {
	layoutMu.Lock()
	defer layoutMu.Unlock()
	gv, err := graphviz.New(ctx)
	if err != nil {
		return nil, err
	}
	defer gv.Close()
	graph, err := graphviz.ParseBytes([]byte(Dot(c)))
	if err != nil {
		return nil, err
	}
	defer graph.Close()
	var out bytes.Buffer
	if err := gv.Render(ctx, graph, graphviz.SVG, &out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
