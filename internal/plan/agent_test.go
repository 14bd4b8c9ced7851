package plan

import (
	"strings"
	"testing"
)

func TestAgentSteps(t *testing.T) {
	const head = "name: a\ninputs: {dir: {type: string}}\nsteps:\n  - id: list\n    capability: file.list\n"
	for _, tt := range []struct {
		name, step, want string // want: "" valid, or the problem's field and a word of it
	}{
		{"valid", "agent: {goal: 'sum ${steps.list.data.files} in ${inputs.dir}', capabilities: [file.checksum]}\n    output_schema: {type: object}", ""},
		{"no scope", "agent: {goal: g, capabilities: []}", "steps[1].agent.capabilities"},
		{"not a capability", "agent: {goal: g, capabilities: [File]}", "steps[1].agent.capabilities[0]: \"File\" is not a capability"},
		{"listed twice", "agent: {goal: g, capabilities: [a.b, a.b]}", "steps[1].agent.capabilities[1]: capability \"a.b\" is listed twice"},
		{"a capability too", "capability: a.b\n    agent: {goal: g, capabilities: [a.b]}", "steps[1].capability: capability does not apply to an agent step"},
		{"with", "with: {x: 1}\n    agent: {goal: g, capabilities: [a.b]}", "steps[1].with: with does not apply"},
		{"no room to run", "agent: {goal: g, capabilities: [a.b], max_rounds: 2, max_repairs: 2}", "steps[1].agent.max_repairs: max_repairs 2 leaves no round"},
		{"unknown reference", "agent: {goal: '${steps.nope.data}', capabilities: [a.b]}", "steps[1].agent.goal"},
		{"bad output schema", "agent: {goal: g, capabilities: [a.b]}\n    output_schema: {type: 12}", "steps[1].output_schema: not a valid JSON Schema"},
		{"output schema of a tool step", "capability: a.b\n    output_schema: {type: object}", "steps[1].output_schema: output_schema applies to agent steps only"},
		{"approve", "agent: {goal: g, capabilities: [a.b], approve: sometimes}", "steps[1].agent.approve"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, probs := Parse("p.yaml", []byte(head+"  - id: triage\n    "+tt.step+"\n"))
			if tt.want == "" {
				if len(probs) > 0 {
					t.Fatal(probs)
				}
				a := p.Step("triage").Agent
				if a.Model != DefaultAgentModel || a.MaxRounds != DefaultMaxRounds || *a.MaxRepairs != DefaultMaxRepairs || a.Budget.LLMCalls != DefaultMaxRounds ||
					a.Approve != ApproveRisky || strings.Join(p.Step("triage").Deps, ",") != "list" || AgentCalls(p) != DefaultMaxRounds {
					t.Fatalf("defaults or deps: %+v %v", a, p.Step("triage").Deps)
				}
				return
			}
			field, word, _ := strings.Cut(tt.want, ": ")
			for _, pr := range probs {
				if pr.Field == field && strings.Contains(pr.Message, word) && pr.Line > 0 {
					return
				}
			}
			t.Fatalf("want %q at a line, got %v", tt.want, probs)
		})
	}
}
