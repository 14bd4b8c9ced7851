package router

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/yamldoc"
)

// Route kinds.
const (
	KindRule = "rule"
	KindLLM  = "llm"
)

// Result is a routed request.
type Result struct {
	// Plan is nil when nothing matched.
	Plan *plan.Plan `json:"-"`
	// PlanYAML is the plan as YAML text; PlanValue the same as plain values.
	PlanYAML  string   `json:"plan,omitempty"`
	PlanValue any      `json:"-"`
	Kind      string   `json:"kind,omitempty"`
	ID        string   `json:"id,omitempty"`
	Entities  Entities `json:"entities"`
	Message   string   `json:"message"`
	// Closest names the intents nearest to an unmatched request.
	Closest  []string `json:"closest,omitempty"`
	LLMCalls int      `json:"llm_calls"`
}

// Router routes with rules first, then the LLM when configured.
type Router struct {
	Rules *Rules
	LLM   *LLM // nil: no fallback
	// Capabilities lists what the registry knows (the LLM may use only these).
	// Catalog lists what the LLM fallback may plan with.
	Catalog func() []Capability
	// MaxLLMCalls bounds LLM calls per request, retries included (policy).
	MaxLLMCalls int
	// Root is the project root, for the glob template function.
	Root   string
	Logger hclog.Logger
}

// Route turns text into a plan. A request nothing covers is a Result
// without Plan (and a message naming the closest intents), not an error;
// errors are for broken configuration or a failed LLM.
func (r *Router) Route(ctx context.Context, text string) (*Result, error) {
	e := Extract(text)
	res := &Result{Entities: e}
	if strings.TrimSpace(text) == "" {
		res.Message = "the request is empty"
		return res, nil
	}
	var hints []string
	if r.Rules != nil {
		for _, in := range r.Rules.Match(e) {
			if miss := in.missing(e); len(miss) > 0 {
				hints = append(hints, fmt.Sprintf("intent %s matched but the request names no %s", in.ID, strings.Join(miss, ", ")))
				continue
			}
			src, err := in.render(e, r.Root)
			var np NoPlan
			if errors.As(err, &np) {
				hints = append(hints, fmt.Sprintf("intent %s matched but %s", in.ID, string(np)))
				continue
			}
			var bad BadRequest
			if errors.As(err, &bad) {
				return nil, caperr.New(caperr.InvalidInput, "the request cannot be planned: %s", string(bad))
			}
			if err != nil {
				return nil, caperr.Wrap(caperr.ConfigError, err, "routing rule %s: plan template", in.ID).At(r.Rules.File, 0, 0, "intents."+in.ID+".plan")
			}
			p, probs := plan.Parse(r.Rules.File+"#"+in.ID, []byte(src))
			if len(probs) > 0 {
				return nil, caperr.Wrap(caperr.ConfigError, probs, "routing rule %s produced an invalid plan", in.ID)
			}
			res.Plan, res.PlanYAML, res.Kind, res.ID = p, src, KindRule, in.ID
			res.PlanValue = planValue(src)
			res.Message = fmt.Sprintf("matched rule %s", in.ID)
			return res, nil
		}
		res.Closest = r.Rules.Closest(e, 3)
	}
	if r.LLM != nil {
		var caps []Capability
		if r.Catalog != nil {
			caps = r.Catalog()
		}
		p, src, calls, err := r.LLM.Plan(ctx, text, caps, r.MaxLLMCalls)
		res.LLMCalls = calls
		if err != nil {
			return res, err
		}
		res.Plan, res.PlanYAML, res.Kind, res.ID = p, src, KindLLM, r.LLM.Model
		res.PlanValue = planValue(src)
		res.Message = fmt.Sprintf("planned by the LLM (%s) after no rule matched", r.LLM.Model)
		return res, nil
	}
	res.Message = "no route: no rule matches the request and no LLM is configured"
	if len(hints) > 0 {
		res.Message += "; " + strings.Join(hints, "; ")
	}
	if len(res.Closest) > 0 {
		res.Message += fmt.Sprintf(" (closest intents: %s)", strings.Join(res.Closest, ", "))
	}
	return res, nil
}

func planValue(src string) any {
	doc, err := yamldoc.Parse("plan", []byte(src))
	if err != nil {
		return nil
	}
	return doc.Root.Interface()
}
