package console

import (
	"bytes"
	"context"
	"fmt"
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
// with their size and first and last members.
func Dot(g *client.Graph, groups map[string][]string) string {
	var b strings.Builder
	b.WriteString("digraph plan {\n  rankdir=TB; nodesep=0.3; ranksep=0.45;\n")
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#f3f4f6\", color=\"#9ca3af\", fontname=\"Helvetica\", fontsize=11];\n")
	b.WriteString("  edge [color=\"#6b7280\", arrowsize=0.7];\n")
	for _, s := range g.Steps {
		l := label(s)
		if m := groups[s.ID]; len(m) > 0 {
			form := "%d steps: %s … %s\n%s"
			if strings.HasPrefix(s.ID, "chain-") {
				form = "%d steps in a chain: %s → … → %s\n%s"
			}
			l = fmt.Sprintf(form, len(m), m[0], m[len(m)-1], l[strings.Index(l, "\n")+1:])
		}
		fmt.Fprintf(&b, "  %q [id=%q, class=\"step\", label=%q];\n", s.ID, "step-"+s.ID, l)
	}
	for _, s := range g.Steps {
		for _, d := range s.Deps {
			style := "solid"
			if !slices.Contains(s.Data, d) {
				style = "dashed"
			}
			fmt.Fprintf(&b, "  %q -> %q [style=%s, class=%q];\n", d, s.ID, style, "edge-"+style)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

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

// SVG lays the graph out (groups: Collapse's, or nil).
func SVG(ctx context.Context, g *client.Graph, groups map[string][]string) ([]byte, error) {
	layoutMu.Lock()
	defer layoutMu.Unlock()
	gv, err := graphviz.New(ctx)
	if err != nil {
		return nil, err
	}
	defer gv.Close()
	graph, err := graphviz.ParseBytes([]byte(Dot(g, groups)))
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
