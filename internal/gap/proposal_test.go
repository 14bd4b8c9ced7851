package gap

import "testing"

// A gap's proposed output reads the types its consumers' tools want:
// whichever order the plan writes them in (a consumer after the gap was
// not resolved yet when the gap was found), and from a consumer refused
// for its inputs.
func TestProposalTypesWhatConsumersRead(t *testing.T) {
	reg := testRegistry(t)
	for _, c := range []struct {
		name, plan, field string
		opts              Options
	}{
		{"a consumer written after the gap", `name: tr
steps:
  - id: g
    capability: text.translate
  - id: count
    capability: text.count
    with: {text: "${steps.g.data.text}"}
`, "text", Options{}},
		{"a refused consumer", `name: m
steps:
  - id: g
    capability: text.count
    with: {text: a}
    coverage_confidence: 0.1
  - id: c
    capability: video.convert
    with: {input: "${steps.g.data.count}"}
`, "count", Options{MinConfidence: 0.5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Check(mustPlan(t, c.plan), reg, c.opts)
			if len(res.Gaps) < 1 || res.Gaps[0].StepID != "g" {
				t.Fatalf("%+v", res.Gaps)
			}
			props := res.Gaps[0].ProposedOutputSchema["properties"].(map[string]any)
			if props[c.field].(map[string]any)["type"] != "string" {
				t.Fatalf("proposed output does not say %s is a string: %v", c.field, res.Gaps[0].ProposedOutputSchema)
			}
		})
	}
}
