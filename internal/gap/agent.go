package gap

import (
	"cmp"
	"fmt"

	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/registry"
)

// agentScope makes an agent step whose scope holds a capability no tool
// provides a gap of the step: the model could propose it, and it would be
// refused every time.
func (c *checker) agentScope(s *plan.Step, reg *registry.Registry) {
	var missing []string
	var first error
	for _, cp := range s.Agent.Capabilities {
		if _, err := reg.Resolve(cp, ""); err != nil {
			missing = append(missing, cp)
			first = cmp.Or(first, err)
		}
	}
	if len(missing) == 0 {
		return
	}
	details := map[string]any{"scope": missing, "similar": nonNil(reg.Similar(missing[0]))}
	if deps := c.dependts[s.ID]; len(deps) > 0 {
		details["blocks"] = deps
	}
	c.gaps[s.ID] = c.at(s, &Gap{StepID: s.ID, MissingCapability: missing[0], Reason: NoCapabilityMatch,
		ReasonMessage: fmt.Sprintf("agent scope: %v", first), ReasonDetails: details,
		ProposedToolName: c.freeName(proposedName(missing[0]), s.ID), Priority: "high",
		// A tool the agent may call: nothing in the plan says its data.
		ProposedInputSchema: emptyObject(), ProposedOutputSchema: emptyObject()})
}

func emptyObject() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}
