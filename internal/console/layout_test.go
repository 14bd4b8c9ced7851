package console

import (
	"context"
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
