package preflight

import (
	"strconv"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/registry"
)

// AgentCheck is what plan check says of an agent step (docs/agents.md):
// its model, what its scope resolves to now, and its bounds.
type AgentCheck struct {
	Step       string      `json:"step"`
	Model      string      `json:"model"`
	Scope      []ScopeTool `json:"scope"`
	MaxRounds  int         `json:"max_rounds"`
	MaxRepairs int         `json:"max_repairs"`
	Budget     plan.Budget `json:"budget"`
	Approve    string      `json:"approve"`
}

// ScopeTool is a capability of an agent's scope and the tool it resolves
// to ("" when none: a gap); Gated when a call of it waits for a person.
type ScopeTool struct {
	Capability string `json:"capability"`
	Tool       string `json:"tool,omitempty"`
	Gated      bool   `json:"gated,omitempty"`
}

// agentChecks are the plan's agent steps as plan check shows them.
func agentChecks(p *plan.Plan, reg *registry.Registry) []AgentCheck {
	var out []AgentCheck
	for _, s := range p.Steps {
		a := s.Agent
		if a == nil {
			continue
		}
		c := AgentCheck{Step: s.ID, Model: a.Model, MaxRounds: a.MaxRounds, MaxRepairs: *a.MaxRepairs, Budget: a.Budget, Approve: a.Approve}
		for _, cp := range a.Capabilities {
			st := ScopeTool{Capability: cp}
			if r, err := reg.Resolve(cp, ""); err == nil {
				m := r.Chosen.Manifest
				st.Tool = m.Name + "@" + m.Version
				st.Gated = a.Approve == plan.ApproveAlways || (a.Approve == plan.ApproveRisky && m.Risky())
			}
			c.Scope = append(c.Scope, st)
		}
		out = append(out, c)
	}
	return out
}

// agentScopeProblems refuses a scope holding a tool that waits for a
// person (flow.approve): approvals of proposals are the engine's (approve:),
// and a model's own gate would wait where no one looks for it.
func agentScopeProblems(p *plan.Plan, reg *registry.Registry) caperr.Problems {
	var out caperr.Problems
	for i, s := range p.Steps {
		if s.Agent == nil {
			continue
		}
		for j, cp := range s.Agent.Capabilities {
			r, err := reg.Resolve(cp, "")
			if err != nil || r.Chosen.Manifest.Entrypoint.Type != manifest.EntryBuiltin || !builtin.TraitsOf(r.Chosen.Manifest.Entrypoint.Name).WaitsForPerson {
				continue
			}
			out = append(out, p.Place(caperr.New(caperr.InvalidInput, "step %q: %s waits for a person, so it is not a capability an agent may propose: its approve: setting gates proposals", s.ID, cp),
				"steps", strconv.Itoa(i), "agent", "capabilities", strconv.Itoa(j)))
		}
	}
	return out
}
