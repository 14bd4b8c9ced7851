package preflight

import (
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/policy"
)

func TestAgentStepsAreChecked(t *testing.T) {
	reg := coreRegistry(t)
	agent := func(block string) string {
		return "name: a\nsteps:\n  - id: triage\n    agent: {goal: g, " + block + "}\n"
	}
	for _, tt := range []struct {
		name, src string
		models    []string
		status    string
		message   string
	}{
		{"ready", agent("capabilities: [file.checksum], max_rounds: 3"), []string{"default"}, Ready, "ready"},
		{"a model capflow.yaml does not declare", agent("capabilities: [file.checksum], model: gpt, max_rounds: 3"), []string{"default", "local"}, Invalid,
			`model "gpt" is not a provider of capflow.yaml's llm: section (declared: default, local)`},
		{"no provider at all", agent("capabilities: [file.checksum], max_rounds: 3"), nil, Invalid, "none is declared"},
		{"a scope no tool covers", agent("capabilities: [file.checksum, video.convert], max_rounds: 3"), []string{"default"}, PartialComplete, "triage (video.convert"},
		{"more calls than the policy allows", agent("capabilities: [file.checksum], budget: {llm_calls: 4}"), []string{"default"}, BlockedByPolicy,
			"agent steps may make 4 model calls"},
		{"max_rounds counts when no budget says", agent("capabilities: [file.checksum], max_rounds: 5"), []string{"default"}, BlockedByPolicy, "may make 5 model calls"},
		{"the defaults fit the default policy", agent("capabilities: [file.checksum]"), []string{"default"}, Ready, "ready"},
		{"a scope holding a gate", agent("capabilities: [file.checksum, flow.approve]"), []string{"default"}, Invalid, "flow.approve waits for a person"},
		{"a scope the plan's policy denies", "name: a\npolicy: {deny: [file.write]}\nsteps:\n  - id: triage\n    agent: {goal: g, capabilities: [file.checksum, file.write]}\n",
			[]string{"default"}, BlockedByPolicy, "file.write"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := Check(Request{Plan: parse(t, tt.src), Registry: reg, Models: tt.models, Policy: policy.Default()})
			if r.Status != tt.status || !strings.Contains(r.Message, tt.message) {
				t.Fatalf("%s: %s", r.Status, r.Message)
			}
			if tt.status == Ready && (len(r.Agents) != 1 || r.Agents[0].Scope[0].Tool != "file-checksum@1.0.0" || r.Agents[0].Scope[0].Gated || r.Agents[0].Approve != "risky") {
				t.Fatalf("agents: %+v", r.Agents)
			}
			if tt.status == Invalid && (len(r.Problems) != 1 || !strings.HasPrefix(r.Problems[0].Field, "steps[0].agent.") || r.Problems[0].Line != 4) {
				t.Fatalf("problems: %+v", r.Problems)
			}
		})
	}
}
