// Package preflight decides whether a plan may run: it validates the
// plan and its inputs, resolves every step to a tool, detects gaps and
// applies policy. The CLI's `plan check` and the workflow's Resolve
// activity both call Check, so a service with only a Temporal client gets
// exactly the checks a person gets.
package preflight

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/verdict"
)

// Plan statuses (docs/plans.md).
const (
	Ready           = verdict.Ready
	PartialComplete = verdict.PartialComplete
	BlockedByPolicy = verdict.BlockedByPolicy
	Invalid         = verdict.Invalid
)

// Request is one check.
type Request struct {
	Plan     *plan.Plan
	Inputs   map[string]any
	Registry *registry.Registry
	// Policy is the project policy; nil means allow all, default limits.
	Policy        *policy.Policy
	MinConfidence float64
	Deps          gap.DepChecker
	// InputsOptional lets a plan be checked before its inputs are known
	// (`plan check` without --input): missing required inputs become notes
	// instead of making the plan invalid. Wrong values are still invalid.
	InputsOptional bool
	// CacheTTL is the project's default cache TTL (0: config's default).
	CacheTTL time.Duration
	// CapabilityLimits are capflow.yaml's limits, by capability.
	CapabilityLimits map[string]manifest.Limits
	// Models are capflow.yaml's llm providers, which an agent step's
	// model must name.
	Models []string
	// Literals, when set, finds the mistake in a builtin's input written
	// in the plan as it is (builtin.CheckLiteral: a query or a template
	// that cannot parse), and the field it is in. The CLI sets it; a
	// worker, which parses no user program in its own process, does not.
	Literals func(builtin string, with map[string]any) (field string, err error)
}

// Problem is a plan or input problem in JSON form.
type Problem = verdict.Problem

// PolicyReport is the policy part of the report.
type PolicyReport = policy.Report

// Report is the outcome of a check.
type Report struct {
	Plan       string               `json:"plan"`
	Status     string               `json:"status"`
	Message    string               `json:"message"`
	Inputs     map[string]any       `json:"inputs,omitempty"`
	Resolution []gap.StepResolution `json:"resolution"`
	Gaps       []gap.Gap            `json:"gaps"`
	Policy     PolicyReport         `json:"policy"`
	Problems   []Problem            `json:"problems,omitempty"`
	Notes      []string             `json:"notes,omitempty"`
	// Confinement lists the tools that start processes, and what each
	// may touch.
	Confinement []Confinement `json:"confinement,omitempty"`
	// Cache lists the steps that ask for the result cache, and whether
	// they get it.
	Cache []CacheDecision `json:"cache,omitempty"`
	// Limits lists the tools whose limits hold the plan's steps across
	// every run and worker.
	Limits []Limit `json:"limits,omitempty"`
	// Agents lists the agent steps: model, scope as it resolves, bounds.
	Agents []AgentCheck `json:"agents,omitempty"`

	// Effective policy, for the executor.
	EffectivePolicy *policy.Policy `json:"-"`
}

// ProblemsOf converts problems to their JSON form.
func ProblemsOf(ps caperr.Problems) []Problem {
	out := []Problem{}
	for _, p := range ps {
		out = append(out, Problem{File: p.File, Line: p.Line, Column: p.Column, Field: p.Field, Message: p.Message, Code: p.Code})
	}
	return out
}

// InvalidReport is the report of a plan that did not parse.
func InvalidReport(name string, probs caperr.Problems) *Report {
	r := refusedReport(name, "the plan is invalid", probs)
	// A plan that does not read is not resolved: what resolution finds
	// (capabilities, step inputs against their tools' schemas, policy)
	// comes once these are fixed, which a user had not expected.
	r.Notes = []string{NotResolvedNote}
	return r
}

// NotResolvedNote says what a plan refused as it was read was not checked for.
const NotResolvedNote = "its capabilities, its steps' inputs against their tools' schemas, and policy are checked once these problems are fixed"

// InvalidInputsReport is the report of a plan whose request inputs are
// wrong or missing (a run is not started for it).
func InvalidInputsReport(name string, probs caperr.Problems) *Report {
	return refusedReport(name, "the request inputs are invalid", probs)
}

func refusedReport(name, what string, probs caperr.Problems) *Report {
	msg := what + ": " + probs[0].Error()
	if len(probs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(probs)-1)
	}
	return &Report{Plan: name, Status: Invalid, Message: msg,
		Resolution: []gap.StepResolution{}, Gaps: []gap.Gap{}, Problems: ProblemsOf(probs),
		Policy: PolicyReport{Allowed: true, Violations: []policy.Violation{}}}
}

// Check runs every stage and returns the report. Gaps and policy are both
// evaluated even when one fails, so the report is complete.
func Check(req Request) *Report {
	p := req.Plan
	r := &Report{Plan: p.Name, Resolution: []gap.StepResolution{}, Gaps: []gap.Gap{}}
	inputs, missing, probs := p.ResolveInputs(req.Inputs, !req.InputsOptional)
	if req.InputsOptional {
		for _, m := range missing {
			r.Notes = append(r.Notes, fmt.Sprintf("missing required input %q (not checked: no inputs given)", m))
		}
	}
	r.Inputs = inputs
	base := req.Policy
	if base == nil {
		base = policy.Default()
	}
	eff := base
	if p.Policy != nil {
		eff = base.Narrow(policy.Spec{Allow: p.Policy.Allow, Deny: p.Policy.Deny, Limits: p.Policy.Limits}, "plan "+p.Name)
	}
	r.EffectivePolicy = eff
	if v := eff.TooManySteps(max(len(p.Steps), plan.LeafSteps(p))); v != nil {
		// Refused before resolution (and before anything walks each
		// inclusion of a sub-plan): resolving a plan far past the limit
		// would cost time and memory for an answer already known.
		viol := []policy.Violation{*v}
		r.Policy = PolicyReport{Source: eff.Source, Allowed: false, Violations: viol, Limits: eff.Limits,
			MaxParallel: eff.EffectiveParallel(p.MaxParallel), Notes: eff.Notes}
		r.Status = BlockedByPolicy
		r.Message = fmt.Sprintf("blocked by policy: %s (not resolved)", viol[0].Message)
		return r
	}
	gr := gap.Check(p, req.Registry, gap.Options{MinConfidence: req.MinConfidence, Deps: req.Deps})
	r.Resolution, r.Gaps = gr.Resolution, gr.Gaps
	if len(gr.Problems) > 0 {
		// A condition that does not type-check makes the plan invalid.
		probs = append(gr.Problems, probs...)
	}
	tools := map[string]*manifest.Manifest{}
	for _, res := range gr.Resolution {
		tools[res.StepID] = res.Manifest
	}
	var facts []policy.StepFacts
	for _, s := range p.Steps {
		if s.Agent != nil {
			// What it may propose answers to the policy now: a capability
			// the policy denies is never in an agent's scope.
			facts = append(facts, scopeFacts(s, "")...)
			continue
		}
		if s.Plan != "" {
			continue // a sub-plan's own steps are checked with it
		}
		st := Settings(p, s, tools[s.ID])
		if n := oneAttempt(s, st, tools[s.ID]); n != "" {
			r.Notes = append(r.Notes, n)
		}
		if n := unsetSecrets(s, tools[s.ID], req.Deps); n != "" {
			r.Notes = append(r.Notes, n)
		}
		f := policy.StepFacts{ID: s.ID, Capability: s.Capability}
		// Only retries the plan asks for can break the policy; built-in
		// and tool defaults are clamped to it when the step runs.
		if s.Retry != nil || p.Defaults.Retry.MaxAttempts > 0 {
			f.MaxAttempts = st.MaxAttempts
		}
		facts = append(facts, f)
	}
	// A sub-plan's steps answer to the same policy (and count toward
	// max_steps): a parent cannot run through a child what it may not run.
	facts = append(facts, subPlanFacts(p, "")...)
	viol := eff.Check(facts, p.MaxParallel)
	if v := eff.TooManyLLMCalls(plan.AgentCalls(p)); v != nil {
		viol = append(viol, *v)
	}
	if viol == nil {
		viol = []policy.Violation{}
	}
	// The plan's own mistakes that only resolution shows: its agents'
	// models and scopes, and its builtins' literal programs.
	planProbs := append(agentModels(p, req.Models), agentScopeProblems(p, req.Registry)...)
	planProbs = append(planProbs, literalProblems(p, tools, req.Literals)...)
	probs = append(probs, planProbs...)
	r.Policy = PolicyReport{Source: eff.Source, Allowed: len(viol) == 0, Violations: viol, Limits: eff.Limits,
		MaxParallel: eff.EffectiveParallel(p.MaxParallel), Notes: eff.Notes, Sandbox: eff.Sandbox}
	r.Confinement = confinements(gr.Resolution)
	r.Limits = limits(gr.Resolution, req.CapabilityLimits)
	r.Agents = agentChecks(p, req.Registry)
	ttl := req.CacheTTL
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	r.Cache = cacheDecisions(p, tools, ttl)
	switch {
	case len(probs) > 0:
		r.Status = Invalid
		r.Problems = ProblemsOf(probs)
		what := "the request inputs are invalid"
		if len(gr.Problems) > 0 || len(planProbs) > 0 {
			what = "the plan is invalid"
		}
		r.Message = fmt.Sprintf("%s: %s", what, probs[0].Error())
		if len(probs) > 1 {
			r.Message += fmt.Sprintf(" (and %d more)", len(probs)-1)
		}
	case len(viol) > 0:
		r.Status = BlockedByPolicy
		r.Message = fmt.Sprintf("blocked by policy: %s", viol[0].Message)
	case len(r.Gaps) > 0:
		r.Status = PartialComplete
		var caps []string
		for _, g := range r.Gaps {
			caps = append(caps, g.StepID+" ("+g.MissingCapability+": "+g.Reason+")")
		}
		sort.Strings(caps)
		r.Message = fmt.Sprintf("%d of %d steps are not covered: %s", len(r.Gaps), len(p.Steps), strings.Join(caps, "; "))
	default:
		r.Status = Ready
		r.Message = "ready: " + caperr.Count(len(p.Steps), "step") + " resolved"
	}
	return r
}

// literalProblems are the mistakes check finds in builtins' inputs as the
// plan wrote them, positioned at their field.
func literalProblems(p *plan.Plan, tools map[string]*manifest.Manifest, check func(string, map[string]any) (string, error)) caperr.Problems {
	var out caperr.Problems
	for i, s := range p.Steps {
		m := tools[s.ID]
		if check == nil || m == nil || m.Entrypoint.Type != manifest.EntryBuiltin {
			continue
		}
		field, err := check(m.Entrypoint.Name, s.With)
		if err == nil {
			continue
		}
		e := &caperr.Error{Code: caperr.CodeOf(err), Message: err.Error()}
		out = append(out, p.Place(e, "steps", strconv.Itoa(i), "with", field))
	}
	return out
}

// subPlanFacts lists the steps of p's sub-plans, named parent/child.
func subPlanFacts(p *plan.Plan, prefix string) []policy.StepFacts {
	var out []policy.StepFacts
	for _, s := range p.Steps {
		if s.Sub == nil {
			continue
		}
		for _, c := range s.Sub.Steps {
			switch {
			case c.Agent != nil:
				out = append(out, scopeFacts(c, prefix+s.ID+"/")...)
			case c.Plan == "":
				out = append(out, policy.StepFacts{ID: prefix + s.ID + "/" + c.ID, Capability: c.Capability})
			}
		}
		out = append(out, subPlanFacts(s.Sub, prefix+s.ID+"/")...)
	}
	return out
}

// oneAttempt says when a step's plan asks for retries its tool will not
// get: a tool that is not idempotent gets one attempt (plan.Clamp), which
// would otherwise be learnt from a run.
func oneAttempt(s *plan.Step, st StepSettings, m *manifest.Manifest) string {
	if m == nil || m.Idempotent || st.MaxAttempts <= 1 || s.Retry == nil || s.Retry.MaxAttempts <= 1 {
		return ""
	}
	return fmt.Sprintf("step %s asks retry: {max_attempts: %d}, but %s@%s is not idempotent: it gets one attempt (another could repeat what the first did); mark the tool idempotent: true if it can run twice", s.ID, s.Retry.MaxAttempts, m.Name, m.Version)
}

// agentModels says where an agent step names a model capflow.yaml does
// not declare.
func agentModels(p *plan.Plan, models []string) caperr.Problems {
	var out caperr.Problems
	for i, s := range p.Steps {
		if s.Agent == nil || slices.Contains(models, s.Agent.Model) {
			continue
		}
		declared := "none is declared: add an llm: section to capflow.yaml (docs/agents.md)"
		if len(models) > 0 {
			declared = "declared: " + strings.Join(models, ", ")
		}
		line, col := p.Pos("steps", strconv.Itoa(i), "agent", "model")
		if line == 0 {
			line, col = p.Pos("steps", strconv.Itoa(i), "agent")
		}
		out = append(out, caperr.New(caperr.InvalidInput, "step %q: model %q is not a provider of capflow.yaml's llm: section (%s)", s.ID, s.Agent.Model, declared).
			At(p.File, line, col, fmt.Sprintf("steps[%d].agent.model", i)))
	}
	return out
}

// scopeFacts are an agent step's scope as the policy sees it: a step per
// capability it may propose.
func scopeFacts(s *plan.Step, prefix string) []policy.StepFacts {
	var out []policy.StepFacts
	for _, c := range s.Agent.Capabilities {
		out = append(out, policy.StepFacts{ID: prefix + s.ID, Capability: c})
	}
	return out
}

// unsetSecrets notes a step whose tool's secrets are not set where the
// plan is checked (the worker reads its own environment): the tool runs
// without them. A note, not a gap: a secret may be optional to its tool;
// an env dependency makes one required.
func unsetSecrets(s *plan.Step, m *manifest.Manifest, deps gap.DepChecker) string {
	if m == nil || deps == nil {
		return ""
	}
	var unset []string
	for _, name := range m.Secrets {
		env := manifest.Dependency{Kind: manifest.DepEnv, Name: name}
		required := slices.ContainsFunc(m.Dependencies, func(d manifest.Dependency) bool { return d.Kind == env.Kind && d.Name == name })
		if !required && deps.Check(env) != nil { // a required one is a gap already
			unset = append(unset, name)
		}
	}
	if len(unset) == 0 {
		return ""
	}
	return fmt.Sprintf("step %s: %s's secret %s is not set in this environment; the tool runs without it unless the worker's has it (a dependency {kind: env, name: NAME} makes it required)",
		s.ID, m.ID(), strings.Join(unset, ", "))
}
