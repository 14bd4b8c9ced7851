package policy

import (
	"encoding/json"
	"fmt"

	"github.com/capflow/capflow/wire"
)

// Report is what the policy said of a plan (a check's, a run's).
type Report struct {
	Source      string         `json:"source,omitempty"`
	Allowed     bool           `json:"allowed"`
	Violations  []Violation    `json:"violations"`
	Limits      map[string]int `json:"limits"`
	MaxParallel int            `json:"max_parallel"`
	Notes       []string       `json:"notes,omitempty"`
	// Sandbox is the project's confinement of command tools.
	Sandbox SandboxMode `json:"sandbox,omitempty"`
}

// Violation is one broken rule: the wire type, defined once.
type Violation = wire.Violation

// StepFacts is what the policy needs to know about one step.
type StepFacts struct {
	ID          string
	Capability  string
	MaxAttempts int // effective retry attempts (0 = unknown)
}

// Check returns every violation of the plan against p.
func (p *Policy) Check(steps []StepFacts, maxParallel int) []Violation {
	var out []Violation
	if v := p.TooManySteps(len(steps)); v != nil {
		out = append(out, *v)
	}
	for _, s := range steps {
		if d := p.Capability(s.Capability); !d.Allowed {
			out = append(out, Violation{Rule: d.Rule, StepID: s.ID, Message: fmt.Sprintf("step %s uses %s, which the policy forbids (%s)", s.ID, s.Capability, d.Rule)})
		}
		if lim, ok := p.Limits[MaxToolRetries]; ok && s.MaxAttempts-1 > lim {
			out = append(out, Violation{Rule: fmt.Sprintf("limits.max_tool_retries: %d", lim), StepID: s.ID,
				Message: fmt.Sprintf("step %s may retry %d times; the policy allows %d", s.ID, s.MaxAttempts-1, lim)})
		}
	}
	_ = maxParallel // parallelism is clamped to the limit, never a violation
	return out
}

// CeilingSteps bounds max_steps whatever the policy says (0, unlimited,
// included): past it a plan costs the checks themselves too much.
const CeilingSteps = 100000

// TooManySteps is the max_steps violation of a plan of n steps, or nil.
func (p *Policy) TooManySteps(n int) *Violation {
	lim := p.Limits[MaxSteps]
	if lim <= 0 || lim > CeilingSteps {
		lim = CeilingSteps
	}
	if n > lim {
		where := fmt.Sprintf("limits.max_steps in the project's policy (policy.yaml) raises it, up to %d", CeilingSteps)
		if lim == CeilingSteps {
			where = "no policy raises it: split the plan into sub-plans or a for_each"
		}
		return &Violation{Rule: fmt.Sprintf("limits.max_steps: %d", lim), Message: fmt.Sprintf("the plan has %d steps; the policy allows %d (%s)", n, lim, where)}
	}
	return nil
}

// CeilingParallel bounds max_parallel whatever the policy says: Temporal
// refuses more than 2,000 pending activities (or child workflows) in one
// workflow, and a run's steps, items and decisions all count.
const CeilingParallel = 1000

// EffectiveParallel clamps a plan's max_parallel to the policy and to
// CeilingParallel.
func (p *Policy) EffectiveParallel(planMax int) int {
	lim := p.Limits[MaxParallel]
	n := planMax
	if planMax <= 0 || (lim > 0 && planMax > lim) {
		n = lim
	}
	if n <= 0 || n > CeilingParallel {
		n = CeilingParallel
	}
	return n
}

func schemaDecode(v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// TooManyLLMCalls refuses agent steps whose model calls could pass the
// run's max_llm_calls (the router's calls count against it too).
func (p *Policy) TooManyLLMCalls(n int) *Violation {
	lim := p.Limits[MaxLLMCalls]
	if n <= lim {
		return nil
	}
	return &Violation{Rule: fmt.Sprintf("limits.max_llm_calls: %d", lim),
		Message: fmt.Sprintf("the plan's agent steps may make %d model calls (their budget.llm_calls, or max_rounds); the policy allows %d a run (limits.max_llm_calls in policy.yaml raises it)", n, lim)}
}
