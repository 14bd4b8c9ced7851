// Package gap decides, before anything runs, whether every step of a
// plan is covered by a tool (docs/plans.md). Per step, in order:
// capability name valid → a tool provides it (or the pinned tool exists)
// → schema compatibility (contract and data flow) → confidence
// (fail-closed) → the chosen tool's dependencies are available.
package gap

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/expr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/suggest"
	"github.com/capflow/capflow/wire"
)

// Reasons (the wire's).
const (
	InvalidCapability     = wire.GapInvalidCapability
	NoCapabilityMatch     = wire.GapNoCapabilityMatch
	SchemaIncompatible    = wire.GapSchemaIncompatible
	LowConfidence         = wire.GapLowConfidence
	DependencyUnavailable = wire.GapDependencyUnavailable
)

// Gap is one uncovered step: the wire type, defined once.
type Gap = wire.Gap

// StepResolution records the tool chosen for a step.
type StepResolution struct {
	wire.Resolution
	// Manifest stays with the worker (clients read the Resolution).
	Manifest *manifest.Manifest `json:"-"`
}

// DepChecker checks one dependency (internal/depcheck in production).
type DepChecker interface {
	Check(manifest.Dependency) error
}

// Options of Check.
type Options struct {
	// MinConfidence: steps with coverage_confidence below it are gaps.
	MinConfidence float64
	// Deps checks dependencies; nil skips that stage.
	Deps DepChecker
}

// Result is the resolution of every covered step and the gaps.
type Result struct {
	Resolution []StepResolution `json:"resolution"`
	Gaps       []Gap            `json:"gaps"`
	// Problems are conditions (`when`) that do not type-check: they make
	// the plan invalid, not a gap.
	Problems caperr.Problems `json:"-"`
}

type checker struct {
	p     *plan.Plan
	reg   *registry.Registry
	opts  Options
	tools map[string]*manifest.Manifest // step id -> chosen tool
	// ranked is each step's best-ranked provider, kept when the step is
	// refused: what it would read still types a gap's proposed output.
	ranked   map[string]*manifest.Manifest
	gaps     map[string]*Gap
	dependts map[string][]string
	current  *plan.Step // the step whose inputs are being checked
	// subs are the checks of sub-plan steps' plans, by step id.
	subs map[string]*checker
	// proposing are the steps whose gaps propose a tool: its schemas are
	// drawn once every step is resolved (a later step's tool says what
	// type it reads).
	proposing []*plan.Step
	// schemas: compiled, by the map they were compiled from (compiled).
	schemas map[unsafe.Pointer]*schema.Schema
}

// Check analyses every step, and every sub-plan with its parent.
func Check(p *plan.Plan, reg *registry.Registry, opts Options) Result {
	_, res := check(p, reg, opts)
	return res
}

func check(p *plan.Plan, reg *registry.Registry, opts Options) (*checker, Result) {
	c := &checker{p: p, reg: reg, opts: opts, tools: map[string]*manifest.Manifest{}, ranked: map[string]*manifest.Manifest{}, gaps: map[string]*Gap{}, dependts: p.Dependents(), subs: map[string]*checker{}}
	res := Result{Resolution: []StepResolution{}, Gaps: []Gap{}}
	var subGaps []Gap
	index := map[string]int{}
	for i, s := range p.Steps {
		index[s.ID] = i
	}
	resolutions := map[string]StepResolution{}
	candidates := map[string][]registry.Candidate{}
	// Pass 1: names and providers, so data flow can see every producer.
	for _, s := range p.Steps {
		if s.Agent != nil {
			c.agentScope(s, reg)
			continue
		}
		if s.Plan != "" {
			if s.Sub != nil {
				sc, sr := check(s.Sub, reg, opts)
				c.subs[s.ID] = sc
				for _, g := range sr.Gaps {
					g.StepID = s.ID + "/" + g.StepID
					subGaps = append(subGaps, g)
				}
				res.Problems = append(res.Problems, sr.Problems...)
			}
			continue
		}
		if !manifest.ValidCapability(s.Capability) {
			c.addGap(s, InvalidCapability, fmt.Sprintf("%q is not a capability: want domain.action (lowercase [a-z0-9_]+ on each side of one dot)", s.Capability),
				map[string]any{"similar": reg.Similar(strings.ToLower(s.Capability))})
			continue
		}
		r, err := reg.Resolve(s.Capability, s.Tool)
		leftOut := reg.LeftOut[s.Capability]
		if err != nil && s.Tool == "" && len(leftOut) == 0 {
			if near := suggest.Typo(s.Capability, reg.Capabilities()); near != "" {
				// The plan's typo, not a tool to write: exit 2 at its line.
				line, col := p.Pos("steps", strconv.Itoa(index[s.ID]), "capability")
				res.Problems = append(res.Problems, caperr.New(caperr.InvalidInput, "no tool provides %q: did you mean %q? (a new capability, not a typo: a tool that provides it first, capflow tools scaffold NAME --capability %s)", s.Capability, near, s.Capability).
					At(p.File, line, col, fmt.Sprintf("steps[%d].capability", index[s.ID])))
				continue
			}
		}
		if err != nil {
			details := map[string]any{"similar": nonNil(reg.Similar(s.Capability))}
			if len(leftOut) > 0 {
				details["left_out"] = leftOut // a tool to mend, not to write
			}
			if s.Tool != "" {
				details["pinned"] = s.Tool
				var providers []string
				for _, cand := range r.Candidates {
					providers = append(providers, cand.Name+"@"+cand.Version)
				}
				details["providers"] = nonNil(providers)
			}
			c.addGap(s, NoCapabilityMatch, err.Error(), details)
			continue
		}
		m := r.Chosen.Manifest
		c.tools[s.ID], c.ranked[s.ID] = m, m
		candidates[s.ID] = r.Candidates
		resolutions[s.ID] = resolved(s, m, r.Chosen.Reason)
	}
	// Pass 2: schemas, confidence, dependencies, in that order per step,
	// producers before consumers (a consumer's check reads what its
	// producers' chosen tools return).
	for _, s := range p.Order() {
		if s.Agent != nil {
			continue
		}
		if s.Plan != "" {
			// A sub-plan takes its inputs like a tool takes its with.
			if s.Sub != nil {
				if issues := c.schemaIssues(s, &manifest.Manifest{Name: s.Plan, InputSchema: subPlanInputs(s.Sub)}); len(issues) > 0 {
					c.addGap(s, SchemaIncompatible, fmt.Sprintf("sub-plan %s cannot take this step's inputs: %s", s.Plan, issues[0].String()), map[string]any{"plan": s.Plan, "issues": issues})
				}
			}
			continue
		}
		m := c.tools[s.ID]
		if m == nil {
			continue
		}
		// Seed 004's selection order: capability, then compatibility, then
		// rank. The best-ranked candidate that fits the step wins.
		fit, refused := c.compatible(s, candidates[s.ID])
		if fit == nil {
			if own := c.ownProblems(s, index[s.ID], refused[0]); own != nil {
				// The plan's own typo, not a missing tool: exit 2 at its line.
				res.Problems = append(res.Problems, own...)
				delete(c.tools, s.ID)
				continue
			}
			first := refused[0]
			msg := fmt.Sprintf("%s cannot take this step's inputs: %s", first.Tool, first.Issues[0].String())
			if len(refused) > 1 {
				msg = fmt.Sprintf("none of %d candidates fits this step; %s", len(refused), msg)
			}
			details := map[string]any{"tool": first.Tool, "issues": first.Issues, "candidates": refused}
			if prods := c.producers(first.Issues); len(prods) > 0 {
				details["producers"] = prods // what feeds the step, not a tool to write
			}
			c.addGap(s, SchemaIncompatible, msg, details)
			delete(c.tools, s.ID)
			continue
		}
		if fit.Manifest != m {
			m = fit.Manifest
			c.tools[s.ID] = m
			why := "ranked " + fmt.Sprint(fit.Rank) + ", the best-ranked that fits the step"
			for _, r := range refused {
				why += fmt.Sprintf("; %s refused: %s", r.Tool, r.Issues[0].String())
			}
			resolutions[s.ID] = resolved(s, m, why)
		}
		if s.CoverageConfidence != nil && *s.CoverageConfidence < c.opts.MinConfidence {
			c.addGap(s, LowConfidence, fmt.Sprintf("coverage confidence %.2f is below router.min_confidence %.2f", *s.CoverageConfidence, c.opts.MinConfidence),
				map[string]any{"confidence": *s.CoverageConfidence, "min_confidence": c.opts.MinConfidence, "rationale": s.CoverageRationale, "tool": m.ID()})
			continue
		}
		if missing := c.missingNeeds(s, m); len(missing) > 0 {
			c.addGap(s, DependencyUnavailable, fmt.Sprintf("%s needs what this machine lacks: %s", m.ID(), strings.Join(missing, "; ")),
				map[string]any{"tool": m.ID(), "missing": missing})
			continue
		}
		res.Resolution = append(res.Resolution, resolutions[s.ID])
	}
	res.Problems = append(res.Problems, c.conditions()...)
	res.Problems = append(res.Problems, c.servers()...)
	res.Problems = append(res.Problems, c.outputs()...)
	sort.SliceStable(res.Resolution, func(i, j int) bool { return index[res.Resolution[i].StepID] < index[res.Resolution[j].StepID] })
	c.propose()
	for _, s := range p.Steps {
		if g := c.gaps[s.ID]; g != nil {
			res.Gaps = append(res.Gaps, *g)
		}
	}
	res.Gaps = append(res.Gaps, subGaps...)
	return c, res
}

// missingNeeds is what the step's tool needs that this machine lacks.
func (c *checker) missingNeeds(s *plan.Step, m *manifest.Manifest) []string {
	if c.opts.Deps == nil {
		return nil
	}
	var missing []string
	for _, d := range m.Needs() {
		if d.Kind == manifest.DepRcloneRemote {
			// Name is the input naming the remote: a literal is checked,
			// a reference is known only at run time.
			remote, ok := s.With[d.Name].(string)
			if !ok || strings.Contains(remote, "${") {
				continue
			}
			d.Name = remote
		}
		if err := c.opts.Deps.Check(d); err != nil {
			missing = append(missing, err.Error())
		}
	}
	return missing
}

// subPlanInputs is a sub-plan's inputs as one object schema: what a
// `plan:` step's with must satisfy.
func subPlanInputs(p *plan.Plan) map[string]any {
	props := map[string]any{}
	var req []any
	for _, name := range p.InputNames() {
		props[name] = p.Inputs[name]
		if _, has := p.Inputs[name]["default"]; !has {
			req = append(req, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(req) > 0 {
		s["required"] = req
	}
	return s
}

// outputsSchema types a sub-plan's outputs from its steps: the data of a
// `plan:` step.
func (c *checker) outputsSchema() map[string]any {
	props := map[string]any{}
	for name, tpl := range c.p.Outputs {
		t, err := plan.ParseTemplate(tpl)
		var s map[string]any
		if err == nil && t.IsSingleRef() {
			if sch, issue, skip := c.refSchema(*t[0].Ref); !skip && issue == "" {
				s = sch
			}
		} else if err == nil {
			s = map[string]any{"type": "string"}
		}
		if s == nil {
			s = map[string]any{}
		}
		props[name] = s
	}
	req := make([]any, 0, len(props))
	for _, n := range slices.Sorted(maps.Keys(props)) {
		req = append(req, n)
	}
	return map[string]any{"type": "object", "properties": props, "required": req}
}

// Refusal is why one candidate tool cannot serve a step.
type Refusal struct {
	Tool   string         `json:"tool"`
	Rank   int            `json:"rank"`
	Issues []schema.Issue `json:"issues"`
}

// compatible returns the best-ranked candidate that fits the step, and
// why each better-ranked one (or, with no fit, every one) was refused.
func (c *checker) compatible(s *plan.Step, cands []registry.Candidate) (*registry.Candidate, []Refusal) {
	var refused []Refusal
	for i := range cands {
		cand := &cands[i]
		if cand.Excluded || cand.Manifest == nil {
			continue
		}
		issues := c.schemaIssues(s, cand.Manifest)
		if len(issues) == 0 {
			return cand, refused
		}
		refused = append(refused, Refusal{Tool: cand.Manifest.ID(), Rank: cand.Rank, Issues: issues})
	}
	return nil, refused
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (c *checker) addGap(s *plan.Step, reason, msg string, details map[string]any) {
	priority := "medium"
	if len(c.dependts[s.ID]) > 0 || s.Critical {
		priority = "high"
	}
	if reason == LowConfidence {
		priority = "low"
		if len(c.dependts[s.ID]) > 0 {
			priority = "medium"
		}
	}
	if deps := c.dependts[s.ID]; len(deps) > 0 {
		details["blocks"] = deps
	}
	name := c.freeName(proposedName(s.Capability), s.ID)
	c.gaps[s.ID] = c.at(s, &Gap{StepID: s.ID, MissingCapability: s.Capability, Reason: reason, ReasonMessage: msg, ReasonDetails: details,
		ProposedToolName: name, Priority: priority})
	c.proposing = append(c.proposing, s)
}

// conditions type-checks every `when` against the plan's input schemas and
// the chosen tools' output schemas (a step that is a gap reads as unknown).
func (c *checker) conditions() caperr.Problems {
	var out caperr.Problems
	for i, s := range c.p.Steps {
		if s.When == "" {
			continue
		}
		v := expr.Vars{Inputs: c.p.Inputs, Steps: map[string]map[string]any{}}
		for _, id := range plan.WhenSteps(s.When) {
			sch, _ := c.dataSchema(id)
			v.Steps[id] = sch
		}
		if s.IsForEach() {
			item, _ := c.itemSchema(s)
			v.ItemName, v.Item = s.ItemName(), item
		}
		if err := expr.Check(s.When, v); err != nil {
			line, col := s.WhenLine, s.WhenColumn
			if line == 0 {
				line = s.Line
			}
			out = append(out, caperr.New(caperr.InvalidInput, "when %q: %v", s.When, err).At(c.p.File, line, col, fmt.Sprintf("steps[%d].when", i)))
		}
	}
	return out
}

// outputs checks that each plan output reads something its step declares.
func (c *checker) outputs() caperr.Problems {
	var out caperr.Problems
	for _, name := range slices.Sorted(maps.Keys(c.p.Outputs)) {
		t, err := plan.ParseTemplate(c.p.Outputs[name])
		if err != nil || !t.IsSingleRef() || t[0].Ref.Kind != plan.RefSteps {
			continue
		}
		// Only a path the producer's schema rules out is an error; data that
		// may be absent, or a producer declaring no schema, gives null.
		if _, issue, skip := c.refSchema(*t[0].Ref); !skip && issue != "" && !unknown(issue) {
			out = append(out, caperr.New(caperr.InvalidInput, "output %q: %s: %s", name, t[0].Ref, issue).At(c.p.File, 0, 0, "outputs."+name))
		}
	}
	return out
}
