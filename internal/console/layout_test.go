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
	svg, err := SVG(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
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
		if _, err := SVG(context.Background(), g); err != nil {
			b.Fatal(err)
		}
	}
}
