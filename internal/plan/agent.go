package plan

import (
	"strconv"

	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/schema"
)

// Approval rules of an agent step (docs/agents.md).
const (
	ApproveNever  = "never"
	ApproveRisky  = "risky"
	ApproveAlways = "always"
)

// Agent defaults (docs/agents.md).
const (
	DefaultAgentModel = "default"
	// DefaultMaxRounds fits the default policy's max_llm_calls (3): an
	// agent step with no budget passes plan check as it stands.
	DefaultMaxRounds  = 3
	DefaultMaxRepairs = 2
)

// Agent is an agent step's block: a model proposes calls of the
// capabilities in scope, and capflow checks each proposal as a plan
// before any of it runs (docs/agents.md).
type Agent struct {
	Goal         string   `json:"goal"`
	Capabilities []string `json:"capabilities"`
	Model        string   `json:"model,omitempty"`
	MaxRounds    int      `json:"max_rounds,omitempty"`
	MaxRepairs   *int     `json:"max_repairs,omitempty"`
	Budget       Budget   `json:"budget"`
	Approve      string   `json:"approve,omitempty"`
}

// Budget bounds an agent step's model calls; zero is no bound but the
// policy's (llm_calls: max_rounds).
type Budget struct {
	LLMCalls int     `json:"llm_calls,omitempty"`
	Tokens   int     `json:"tokens,omitempty"`
	USD      float64 `json:"usd,omitempty"`
}

// withDefaults fills what the plan left out.
func (a *Agent) withDefaults() {
	if a.Model == "" {
		a.Model = DefaultAgentModel
	}
	if a.MaxRounds == 0 {
		a.MaxRounds = DefaultMaxRounds
	}
	if a.MaxRepairs == nil {
		n := DefaultMaxRepairs
		a.MaxRepairs = &n
	}
	if a.Budget.LLMCalls == 0 {
		a.Budget.LLMCalls = a.MaxRounds
	}
	if a.Approve == "" {
		a.Approve = ApproveRisky
	}
}

// AgentCalls is how many model calls the plan's agent steps may make
// (their llm_calls budgets), its sub-plans' included (each time one is
// included), counted against the policy's max_llm_calls.
func AgentCalls(p *Plan) int {
	n := 0
	for _, s := range p.Steps {
		if s.Agent != nil {
			n += s.Agent.Budget.LLMCalls
		}
		if s.Sub != nil {
			n += AgentCalls(s.Sub)
		}
	}
	return n
}

// validateAgent checks an agent step: nothing of a tool step, a scope of
// capabilities, an output schema that compiles, a goal's references.
func (c *checker) validateAgent(i int, s *Step, refs *refChecker) {
	if s.Agent == nil {
		if s.OutputSchema != nil {
			c.at(stepPath(i, "output_schema"), "output_schema applies to agent steps only (a tool's output is its tool.yaml's)")
		}
		return
	}
	for _, f := range []struct {
		set  bool
		name string
	}{{s.Capability != "", "capability"}, {s.Plan != "", "plan"}, {s.Tool != "", "tool"}, {s.With != nil, "with"},
		{s.IsForEach(), "for_each"}, {s.CapabilityContract != nil, "capability_contract"}, {s.Cache != nil, "cache"}} {
		if f.set {
			c.at(stepPath(i, f.name), "%s does not apply to an agent step (its goal and capabilities say what it may do)", f.name)
		}
	}
	seen := map[string]bool{}
	for j, cp := range s.Agent.Capabilities {
		switch {
		case !manifest.ValidCapability(cp):
			c.at(stepPath(i, "agent", "capabilities", strconv.Itoa(j)), "%q is not a capability: want domain.action", cp)
		case seen[cp]:
			c.at(stepPath(i, "agent", "capabilities", strconv.Itoa(j)), "capability %q is listed twice", cp)
		}
		seen[cp] = true
	}
	if a := s.Agent; *a.MaxRepairs >= a.MaxRounds {
		c.at(stepPath(i, "agent", "max_repairs"), "max_repairs %d leaves no round for a proposal that runs (max_rounds %d)", *a.MaxRepairs, a.MaxRounds)
	}
	if s.OutputSchema != nil {
		if _, vs := schema.Compile(s.OutputSchema); len(vs) > 0 {
			c.at(stepPath(i, "output_schema"), "not a valid JSON Schema: %s", vs[0].Message)
		}
	}
	tpl, err := ParseTemplate(s.Agent.Goal)
	refs.check(stepPath(i, "agent", "goal"), tpl, err)
}
