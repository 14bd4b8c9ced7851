package plan

import (
	"fmt"
	"strings"
)

// Node decorates a step in a rendered graph.
type Node struct {
	// Detail is the second line of the label, e.g. "→ file-checksum@1.0.0".
	Detail string
	// Class colours the node: ready, gap, pending, running, succeeded,
	// failed, skipped, cancelled, blocked.
	Class string
}

var classStyle = map[string][2]string{ // fill, stroke
	"ready":     {"#e8f4ff", "#3b82f6"},
	"gap":       {"#fde2e2", "#dc2626"},
	"blocked":   {"#fde2e2", "#dc2626"},
	"pending":   {"#f3f4f6", "#9ca3af"},
	"running":   {"#fef9c3", "#ca8a04"},
	"succeeded": {"#dcfce7", "#16a34a"},
	"failed":    {"#fee2e2", "#b91c1c"},
	"skipped":   {"#f3f4f6", "#6b7280"},
	"cancelled": {"#ede9fe", "#7c3aed"},
}

// controlLabels describe a step's control flow in a graph: its sub-plan,
// its for_each, its condition.
func controlLabels(s *Step) []string {
	var out []string
	if s.Plan != "" {
		out = append(out, "sub-plan "+s.Plan)
	}
	if s.IsForEach() {
		src := fmt.Sprint(s.ForEach)
		if l, ok := s.ForEach.([]any); ok {
			src = fmt.Sprintf("%d items", len(l))
		}
		label := "for each " + s.ItemName() + " in " + src
		if s.MaxParallel > 0 {
			label += fmt.Sprintf(" (%d at once)", s.MaxParallel)
		}
		out = append(out, label)
	}
	if s.When != "" {
		out = append(out, "when "+s.When)
	}
	return out
}

func joinLabel(s *Step) string {
	switch s.Join.Policy {
	case JoinAny:
		return "join: any"
	case JoinQuorum:
		return fmt.Sprintf("join: quorum ≥%d/%d", s.Required(), len(s.Deps))
	}
	return ""
}

// Mermaid renders the DAG as a mermaid flowchart.
func Mermaid(p *Plan, nodes map[string]Node) string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	idx := map[string]string{}
	for i, s := range p.Steps {
		idx[s.ID] = fmt.Sprintf("n%d", i)
	}
	used := map[string]bool{}
	for _, s := range p.Order() {
		n := nodes[s.ID]
		lines := []string{"<b>" + s.ID + "</b>"}
		if s.Capability != "" {
			lines = append(lines, s.Capability)
		}
		lines = append(lines, mermaidText(controlLabels(s))...)
		if n.Detail != "" {
			lines = append(lines, n.Detail)
		}
		if j := joinLabel(s); j != "" {
			lines = append(lines, j)
		}
		if s.Critical {
			lines = append(lines, "critical")
		}
		fmt.Fprintf(&b, "  %s[\"%s\"]", idx[s.ID], mermaidEscape(strings.Join(lines, "<br/>")))
		if n.Class != "" {
			fmt.Fprintf(&b, ":::%s", n.Class)
			used[n.Class] = true
		}
		b.WriteByte('\n')
	}
	for _, s := range p.Order() {
		for _, d := range s.Deps {
			fmt.Fprintf(&b, "  %s --> %s\n", idx[d], idx[s.ID])
		}
	}
	for _, c := range []string{"ready", "gap", "blocked", "pending", "running", "succeeded", "failed", "skipped", "cancelled"} {
		if used[c] {
			st := classStyle[c]
			fmt.Fprintf(&b, "  classDef %s fill:%s,stroke:%s\n", c, st[0], st[1])
		}
	}
	return b.String()
}

func mermaidEscape(s string) string {
	return strings.NewReplacer(`"`, "#quot;").Replace(s)
}

// mermaidText escapes text that is not markup (a condition's `<`).
func mermaidText(ls []string) []string {
	r := strings.NewReplacer("<", "#lt;", ">", "#gt;")
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = r.Replace(l)
	}
	return out
}

// Dot renders the DAG in Graphviz dot.
func Dot(p *Plan, nodes map[string]Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n", p.Name)
	for _, s := range p.Order() {
		n := nodes[s.ID]
		lines := []string{s.ID}
		if s.Capability != "" {
			lines = append(lines, s.Capability)
		}
		lines = append(lines, controlLabels(s)...)
		if n.Detail != "" {
			lines = append(lines, n.Detail)
		}
		if j := joinLabel(s); j != "" {
			lines = append(lines, j)
		}
		st, ok := classStyle[n.Class]
		if !ok {
			st = [2]string{"#ffffff", "#333333"}
		}
		fmt.Fprintf(&b, "  %q [label=%q, fillcolor=%q, color=%q];\n", s.ID, strings.Join(lines, "\n"), st[0], st[1])
	}
	for _, s := range p.Order() {
		for _, d := range s.Deps {
			fmt.Fprintf(&b, "  %q -> %q;\n", d, s.ID)
		}
	}
	b.WriteString("}\n")
	return b.String()
}
