package plan

import (
	"fmt"
	"sort"

	"github.com/capflow/capflow/internal/expr"
	"github.com/capflow/capflow/internal/suggest"
)

// refChecker checks the references of one step and collects its
// dependencies.
type refChecker struct {
	c      *checker
	p      *Plan
	s      *Step
	ids    map[string]int
	allIDs []string
	deps   map[string]bool
	item   bool // the item and index may be referenced (with, when of a for_each step)
}

func (rc *refChecker) check(fp []string, tpl Template, err error) {
	c, p, s := rc.c, rc.p, rc.s
	if err != nil {
		c.at(fp, "%v", err)
		return
	}
	for _, r := range tpl.Refs() {
		switch r.Kind {
		case RefInputs:
			if _, ok := p.Inputs[r.Name]; !ok {
				c.at(fp, "%s: the plan has no input %q%s", r, r.Name, suggest.Phrase(r.Name, p.InputNames()))
			}
		case RefSteps:
			switch _, ok := rc.ids[r.Name]; {
			case s != nil && r.Name == s.ID:
				c.at(fp, "%s: a step cannot reference its own result", r)
			case !ok:
				c.at(fp, "%s: no step %q%s", r, r.Name, suggest.Phrase(r.Name, rc.allIDs))
			case rc.deps != nil:
				rc.deps[r.Name] = true
			}
		case RefIndex:
			if !rc.item {
				c.at(fp, "%s: only a for_each step has an index", r)
			}
		case RefItem:
			switch {
			case !rc.item:
				c.at(fp, "%s: %q is not a reference root (want inputs., steps., or in a for_each step its item)", r, r.Name)
			case r.Name != s.ItemName():
				c.at(fp, "%s: this step's item is named %q%s", r, s.ItemName(), suggest.Phrase(r.Name, []string{s.ItemName()}))
			}
		}
	}
}

// validateControl checks for_each, as, max_parallel, tolerate, when and
// the step's target (a capability).
func (c *checker) validateControl(i int, s *Step, refs *refChecker) {
	switch {
	case s.Agent != nil:
		// validateAgent
	case s.Capability == "" && s.Plan == "":
		c.at(stepPath(i), "step %q needs a capability (or a sub-plan: plan: FILE, or an agent: block)", s.ID)
	case s.Capability != "" && s.Plan != "":
		c.at(stepPath(i, "plan"), "step %q names both a capability and a sub-plan: choose one", s.ID)
	case s.Plan != "":
		for _, f := range []struct {
			set  bool
			name string
		}{{s.Tool != "", "tool"}, {s.IsForEach(), "for_each"}, {s.CapabilityContract != nil, "capability_contract"}, {s.Cache != nil, "cache"}} {
			if f.set {
				c.at(stepPath(i, f.name), "%s does not apply to a sub-plan step", f.name)
			}
		}
	}
	if s.As != "" && reservedNames[s.As] {
		c.at(stepPath(i, "as"), "as %q is reserved (a reference root, or a word of the condition language): choose another name", s.As)
	}
	if !s.IsForEach() {
		for _, f := range []struct {
			set  bool
			name string
		}{{s.As != "", "as"}, {s.MaxParallel != 0, "max_parallel"}, {s.Tolerate != nil, "tolerate"}} {
			if f.set {
				c.at(stepPath(i, f.name), "%s applies to for_each steps only", f.name)
			}
		}
	} else {
		switch v := s.ForEach.(type) {
		case string:
			tpl, err := ParseTemplate(v)
			switch {
			case err != nil:
				c.at(stepPath(i, "for_each"), "%v", err)
			case !tpl.IsSingleRef():
				c.at(stepPath(i, "for_each"), "for_each must be exactly one reference to a list (${steps.ID.data.PATH} or ${inputs.NAME}) or a literal list")
			case tpl[0].Ref.Kind != RefSteps && tpl[0].Ref.Kind != RefInputs:
				c.at(stepPath(i, "for_each"), "for_each %s: a list comes from inputs or an earlier step", tpl[0].Ref)
			case tpl[0].Ref.Kind == RefSteps && tpl[0].Ref.Field != "data":
				c.at(stepPath(i, "for_each"), "for_each %s: success is not a list", tpl[0].Ref)
			default:
				saved := refs.item
				refs.item = false
				refs.check(stepPath(i, "for_each"), tpl, nil)
				refs.item = saved
			}
		case []any:
			CollectRefs(v, nil, func(path []string, tpl Template, err error) {
				saved := refs.item
				refs.item = false
				refs.check(stepPath(i, append([]string{"for_each"}, path...)...), tpl, err)
				refs.item = saved
			})
		}
		if t := s.Tolerate; t != nil && t.Failures != 0 && t.Ratio != 0 {
			c.at(stepPath(i, "tolerate"), "give failures or ratio, not both")
		}
	}
	if s.When != "" {
		if err := expr.Syntax(s.When); err != nil {
			c.at(stepPath(i, "when"), "when %q: %v", s.When, err)
		}
		for _, id := range WhenSteps(s.When) {
			refs.check(stepPath(i, "when"), Template{{Ref: &Ref{Kind: RefSteps, Name: id, Field: "data", Raw: "steps." + id}}}, nil)
		}
	}
}

// WhenSteps lists the steps a CEL condition reads (steps.ID or
// steps["ID"]), sorted: they become dependencies of the step.
func WhenSteps(src string) []string {
	if ids, err := expr.StepsRead(src); err == nil {
		return ids
	}
	// Unparsable: the text's best guess (the syntax error is reported).
	expr := src
	seen := map[string]bool{}
	var out []string
	for _, m := range whenStepRe.FindAllStringSubmatch(expr, -1) {
		id := m[1]
		if id == "" {
			id = m[2]
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// validateOutputs checks the plan's outputs: references to inputs and
// steps that exist.
func (c *checker) validateOutputs(p *Plan, ids map[string]int, allIDs []string) {
	names := make([]string, 0, len(p.Outputs))
	for n := range p.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	rc := refChecker{c: c, p: p, ids: ids, allIDs: allIDs}
	for _, n := range names {
		tpl, err := ParseTemplate(p.Outputs[n])
		if err == nil && len(tpl.Refs()) == 0 {
			err = fmt.Errorf("output %q holds no reference (want ${steps.ID.data.PATH} or ${inputs.NAME})", n)
		}
		rc.check([]string{"outputs", n}, tpl, err)
	}
}
