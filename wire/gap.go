package wire

import "fmt"

// Gap is a step no tool covers (docs/plans.md, the gap report).
type Gap struct {
	StepID               string         `json:"step_id"`
	MissingCapability    string         `json:"missing_capability"`
	Reason               string         `json:"reason"`
	ReasonMessage        string         `json:"reason_message"`
	ReasonDetails        map[string]any `json:"reason_details"`
	ProposedToolName     string         `json:"proposed_tool_name"`
	ProposedInputSchema  map[string]any `json:"proposed_input_schema"`
	ProposedOutputSchema map[string]any `json:"proposed_output_schema"`
	Priority             string         `json:"priority"`
	// File and Line are where the step is written, when its plan came
	// from a file (a sub-plan's step: the sub-plan's file).
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

// LeftOut names the manifests that declare the gap's capability but were
// left out for their problems: a tool to mend, not one to write.
func (g Gap) LeftOut() []string { return g.detailList("left_out") }

// Producers names the earlier steps (and their tools) whose output's
// schema does not promise what the gap's step takes from them: what to
// fix is there, not a tool for the step's capability.
func (g Gap) Producers() []string { return g.detailList("producers") }

// detailList is a list of strings in ReasonDetails, as built or as JSON
// reads it back.
func (g Gap) detailList(key string) []string {
	var out []string
	switch v := g.ReasonDetails[key].(type) {
	case []string:
		out = v
	case []any:
		for _, f := range v {
			if s, ok := f.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// Pinned is the tool the gap's step pins that does not exist ("": none).
func (g Gap) Pinned() string {
	pinned, _ := g.ReasonDetails["pinned"].(string)
	return pinned
}

// Where is where the gap's step is written, FILE:LINE ("": unknown).
func (g Gap) Where() string {
	if g.Line == 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d", g.File, g.Line)
}

// A gap's reasons (Gap.Reason; package gap decides them).
const (
	GapInvalidCapability     = "invalid_capability"
	GapNoCapabilityMatch     = "no_capability_match"
	GapSchemaIncompatible    = "schema_incompatible"
	GapLowConfidence         = "low_confidence"
	GapDependencyUnavailable = "dependency_unavailable"
)
