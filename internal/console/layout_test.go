package console

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/capflow/capflow/client"
)

func TestSVGHasEveryStep(t *testing.T) {
	g := &client.Graph{Plan: "p", Steps: []client.GraphStep{
		{ID: "fetch", Capability: "http.get", Tool: "http-get", Version: "1.0.0"},
		{ID: "each", Capability: "text.render", ForEach: true, Deps: []string{"fetch"}, Data: []string{"fetch"}},
		{ID: "ok", Capability: "flow.approve", Approval: true, Deps: []string{"each"}, When: `steps.fetch.data.size > 3`},
	}}
	svg, err := SVG(context.Background(), Collapsed{Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	if strings.Contains(s, `u00a0`) || !strings.Contains(s, ">"+markRoom+"<") {
		t.Error("a node's blank line for its mark is not blank (a \\u escape drawn as text?)")
	}
	for _, want := range []string{`id="step&#45;fetch"`, `id="step&#45;each"`, `id="step&#45;ok"`, "http.get → http&#45;get@1.0.0", "for each item", "waits for a person", `edge&#45;solid"`, `edge&#45;dashed"`} {
		if !strings.Contains(s, want) {
			t.Errorf("the SVG lacks %s", want)
		}
	}
}

// BenchmarkLayout2500 lays out a 2,500-step plan (docs/console.md: the run
// page of such a plan loads in under 2 s).
func BenchmarkLayout2500(b *testing.B) {
	g := &client.Graph{Plan: "big"}
	for i := 0; i < 2500; i++ {
		s := client.GraphStep{ID: fmt.Sprintf("s%04d", i), Capability: "text.render", Tool: "text-render", Version: "1.0.0"}
		if i > 0 {
			s.Deps = []string{fmt.Sprintf("s%04d", (i-1)/3)}
		}
		g.Steps = append(g.Steps, s)
	}
	for i := 0; i < b.N; i++ {
		c := Collapse(g)
		if _, err := SVG(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// A fan-out of 2,500 branches is drawn as three nodes; its branches are
// one group.
func TestCollapseAFanOut(t *testing.T) {
	g := &client.Graph{Plan: "fan", Steps: []client.GraphStep{{ID: "root", Capability: "x.a"}}}
	var branches []string
	for i := 0; i < 2500; i++ {
		id := fmt.Sprintf("b%04d", i)
		branches = append(branches, id)
		g.Steps = append(g.Steps, client.GraphStep{ID: id, Capability: "x.b", Deps: []string{"root"}, Data: []string{"root"}})
	}
	g.Steps = append(g.Steps, client.GraphStep{ID: "join", Capability: "x.c", Deps: branches})
	c := Collapse(g)
	if len(c.Graph.Steps) != 3 || len(c.Groups) != 1 || len(c.Groups["group:1"]) != 2500 {
		t.Fatalf("collapsed to %d nodes, groups %d", len(c.Graph.Steps), len(c.Groups))
	}
	if j := c.Graph.Steps[2]; j.ID != "join" || len(j.Deps) != 1 || j.Deps[0] != "group:1" {
		t.Fatalf("the join: %+v", j)
	}
	svg, err := SVG(context.Background(), c)
	if err != nil || !strings.Contains(string(svg), "2500 steps: b0000 … b2499") {
		t.Fatalf("the group's label: %v", err)
	}
	if small := Collapse(&client.Graph{Steps: g.Steps[:10]}); len(small.Groups) != 0 {
		t.Fatal("a small plan was collapsed")
	}
}

// A long chain is drawn as one node between what it waits for and what
// waits for it; a chain of different capabilities, or a short one, is not.
func TestCollapseAChain(t *testing.T) {
	g := &client.Graph{Plan: "chain", Steps: []client.GraphStep{{ID: "root", Capability: "x.a"}}}
	prev := "root"
	for i := 0; i < 400; i++ {
		id := fmt.Sprintf("c%03d", i)
		g.Steps = append(g.Steps, client.GraphStep{ID: id, Capability: "x.b", Deps: []string{prev}, Data: []string{prev}})
		prev = id
	}
	g.Steps = append(g.Steps,
		client.GraphStep{ID: "other", Capability: "x.c", Deps: []string{prev}},
		client.GraphStep{ID: "s1", Capability: "x.b", Deps: []string{"other"}},
		client.GraphStep{ID: "s2", Capability: "x.b", Deps: []string{"s1"}},
		client.GraphStep{ID: "side", Capability: "x.b", Deps: []string{"root"}})
	c := Collapse(g)
	ids := []string{}
	for _, s := range c.Graph.Steps {
		ids = append(ids, s.ID+"<"+strings.Join(s.Deps, ",")+"|"+strings.Join(s.Data, ","))
	}
	want := "root<| chain:1<root|root other<chain:1| s1<other| s2<s1| side<root|"
	if got := strings.Join(ids, " "); got != want {
		t.Fatalf("drawn:\n%s\nwant\n%s", got, want)
	}
	if m := c.Groups["chain:1"]; len(m) != 400 || m[0] != "c000" || m[399] != "c399" {
		t.Fatalf("the chain's members: %d", len(m))
	}
	svg, err := SVG(context.Background(), c)
	if err != nil || !strings.Contains(string(svg), "400 steps in a chain: c000 → … → c399") {
		t.Fatalf("the chain's label: %v", err)
	}
}

// A fan-out of FanOutGroup or more is a group at any plan size (300
// branches are one node, not a rank 78,000 px wide), a smaller one is
// drawn step by step; an opened group is drawn step by step and the other
// groups keep their ids.
func TestFanOutGroupsAndExpansion(t *testing.T) {
	g := &client.Graph{Plan: "fan", Steps: []client.GraphStep{{ID: "root", Capability: "x.a"}}}
	add := func(prefix, capability string, n int) {
		for i := 0; i < n; i++ {
			g.Steps = append(g.Steps, client.GraphStep{ID: fmt.Sprintf("%s%03d", prefix, i), Capability: capability, Deps: []string{"root"}})
		}
	}
	add("a", "x.b", 150)
	add("b", "x.c", 130)
	add("c", "x.d", FanOutGroup-1)
	c := Collapse(g)
	if len(c.Groups) != 2 || len(c.Groups["group:1"]) != 150 || len(c.Groups["group:2"]) != 130 || len(c.Graph.Steps) != 1+2+FanOutGroup-1 {
		t.Fatalf("%d nodes, groups %d", len(c.Graph.Steps), len(c.Groups))
	}
	open := Collapse(g, "group:1")
	if len(open.Groups) != 1 || len(open.Groups["group:2"]) != 130 || len(open.Graph.Steps) != 1+150+1+FanOutGroup-1 {
		t.Fatalf("group:1 opened: %d nodes, groups %v", len(open.Graph.Steps), len(open.Groups))
	}
	svg, err := SVG(context.Background(), open)
	if err != nil || !strings.Contains(string(svg), `id="step&#45;a149"`) || !strings.Contains(string(svg), `id="step&#45;group:2"`) ||
		!strings.Contains(string(svg), "group:1: 150 steps, drawn one by one") {
		t.Fatalf("the opened graph: %v", err)
	}
	// The opened group's shared edge is drawn once, to its block; its
	// steps sit in rows of 13 (ceil √150).
	dot := Dot(open)
	if n := strings.Count(dot, `"root" -> "a`); n != 1 || !strings.Contains(dot, `lhead="cluster_group:1"`) || strings.Count(dot, "rank=same") != 12 {
		t.Fatalf("edges from root into the block: %d; rows %d\n%.600s", n, strings.Count(dot, "rank=same"), dot)
	}
}

// A step may be called group-1 or chain-1: a group's node id has a colon,
// which no step id has, so the two never merge.
func TestGroupIDsNeverMeetStepIDs(t *testing.T) {
	g := &client.Graph{Plan: "p", Steps: []client.GraphStep{{ID: "group-1", Capability: "x.a"}}}
	for i := 0; i < FanOutGroup; i++ {
		g.Steps = append(g.Steps, client.GraphStep{ID: fmt.Sprintf("b%02d", i), Capability: "x.b", Deps: []string{"group-1"}})
	}
	c := Collapse(g)
	dot := Dot(c)
	if len(c.Groups["group:1"]) != FanOutGroup || strings.Count(dot, `"group-1" [id=`) != 1 || strings.Count(dot, `"group:1" [id=`) != 1 || !strings.Contains(dot, `"group-1" -> "group:1"`) {
		t.Fatalf("groups %v\n%s", c.Groups, dot)
	}
}
