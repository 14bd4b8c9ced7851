package plan

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/expr"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/suggest"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/schemas"
)

// Parse reads and validates a plan file (YAML or JSON). All problems are
// returned at once, each with file, line, column and field.
func Parse(file string, data []byte) (*Plan, caperr.Problems) {
	doc, err := yamldoc.Parse(file, data)
	if err != nil {
		return nil, caperr.Problems{err.(*caperr.Error)}
	}
	return fromDoc(doc)
}

// FromValue validates a plan given as a JSON-like value (the workflow's
// input); positions are then JSON-path fields only.
func FromValue(name string, v any) (*Plan, caperr.Problems) {
	if doc, ok, err := yamldoc.FromValue(name, v); ok {
		if err != nil {
			return nil, caperr.Problems{err.(*caperr.Error)}
		}
		return fromDoc(doc)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, caperr.Problems{caperr.Wrap(caperr.InvalidInput, err, "plan is not JSON").At(name, 0, 0, "")}
	}
	return Parse(name, b)
}

type checker struct {
	doc   *yamldoc.Doc
	probs caperr.Problems
}

func (c *checker) at(path []string, format string, args ...any) {
	p := c.doc.Root.PosOf(path)
	c.probs = append(c.probs, caperr.New(caperr.InvalidInput, format, args...).At(c.doc.File, p.Line, p.Column, yamldoc.FieldPath(path)))
}

func fromDoc(doc *yamldoc.Doc) (*Plan, caperr.Problems) {
	c := &checker{doc: doc}
	if doc.Root.Kind != yamldoc.Map {
		c.at(nil, "a plan must be a YAML or JSON mapping")
		return nil, c.probs
	}
	raw := doc.Root.Interface().(map[string]any)
	sch := schema.Embedded("plan.schema.json", schemas.Must("plan.schema.json"))
	for _, v := range sch.Validate(raw) {
		c.at(v.Path, "%s", v.Message)
	}
	if len(c.probs) > 0 {
		// With the schema's problems, the one it cannot express: a step
		// needs a capability or a sub-plan.
		steps, _ := raw["steps"].([]any)
		for i, st := range steps {
			m, _ := st.(map[string]any)
			if m == nil {
				continue
			}
			if _, hasCap := m["capability"]; !hasCap {
				if _, hasPlan := m["plan"]; !hasPlan {
					c.at(stepPath(i), "step needs a capability (or a sub-plan: plan: FILE)")
				}
			}
		}
		c.probs.Sort()
		return nil, c.probs
	}
	b, _ := json.Marshal(raw)
	if len(b) > MaxStepBytes {
		c.checkStepSizes(raw)
		if len(c.probs) > 0 {
			return nil, c.probs
		}
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		c.at(nil, "cannot read plan: %v", err)
		return nil, c.probs
	}
	p.File, p.root = doc.File, doc.Root
	if p.FailurePolicy == "" {
		p.FailurePolicy = FailFast
	}
	stepsNode := doc.Root.Get("steps")
	for i, s := range p.Steps {
		if stepsNode != nil && i < len(stepsNode.Items) {
			s.Line = stepsNode.Items[i].Pos.Line
			if w := stepsNode.Items[i].Get("when"); w != nil {
				s.WhenLine, s.WhenColumn = w.Pos.Line, w.Pos.Column
			}
		}
		if s.Join.Policy == "" {
			s.Join.Policy = JoinAll
		}
		if s.OnFailure == "" {
			s.OnFailure = OnFailureRetry
		}
	}
	c.validate(&p)
	if len(c.probs) > 0 {
		c.probs.Sort()
		return nil, c.probs
	}
	return &p, nil
}

// MaxStepBytes bounds one step's JSON: a run's history holds each step
// (docs/limits.md), so larger values belong in a file the step reads.
const MaxStepBytes = 1 << 20

// checkStepSizes refuses steps past MaxStepBytes (asked only of plans
// larger than that).
func (c *checker) checkStepSizes(raw map[string]any) {
	steps, _ := raw["steps"].([]any)
	for i, st := range steps {
		b, _ := json.Marshal(st)
		if len(b) > MaxStepBytes {
			id, _ := st.(map[string]any)["id"].(string)
			c.at(stepPath(i), "step %q is %d KB of JSON, past the %d KB a step may be: put large values in a file and pass its path", id, len(b)>>10, MaxStepBytes>>10)
		}
	}
}

func stepPath(i int, field ...string) []string {
	return append([]string{"steps", strconv.Itoa(i)}, field...)
}

func (c *checker) validate(p *Plan) {
	ids := map[string]int{}
	var allIDs []string
	for i, s := range p.Steps {
		if first, dup := ids[s.ID]; dup {
			c.at(stepPath(i, "id"), "duplicate step id %q (first used by steps[%d])", s.ID, first)
			continue
		}
		ids[s.ID] = i
		allIDs = append(allIDs, s.ID)
	}
	for name, s := range p.Inputs {
		if _, vs := schema.Compile(s); len(vs) > 0 {
			c.at([]string{"inputs", name}, "input %q is not a valid JSON Schema: %s", name, vs[0].Message)
		}
	}
	for i, s := range p.Steps {
		deps := map[string]bool{}
		for j, n := range s.Needs {
			switch _, ok := ids[n]; {
			case n == s.ID:
				c.at(stepPath(i, "needs", strconv.Itoa(j)), "step %q cannot need itself", s.ID)
			case !ok:
				c.at(stepPath(i, "needs", strconv.Itoa(j)), "needs unknown step %q%s", n, suggest.Phrase(n, allIDs))
			default:
				deps[n] = true
			}
		}
		refs := refChecker{c: c, p: p, s: s, ids: ids, allIDs: allIDs, deps: deps}
		refs.item = s.IsForEach()
		CollectRefs(s.With, nil, func(path []string, tpl Template, err error) {
			refs.check(stepPath(i, append([]string{"with"}, path...)...), tpl, err)
		})
		c.validateControl(i, s, &refs)
		for d := range deps {
			s.Deps = append(s.Deps, d)
		}
		sort.Strings(s.Deps)
		c.validateJoin(i, s)
		if s.CapabilityContract != nil {
			for k, sch := range map[string]map[string]any{"input_schema": s.CapabilityContract.InputSchema, "output_schema": s.CapabilityContract.OutputSchema} {
				if sch == nil {
					continue
				}
				if _, vs := schema.Compile(sch); len(vs) > 0 {
					c.at(stepPath(i, "capability_contract", k), "not a valid JSON Schema: %s", vs[0].Message)
				}
			}
		}
	}
	c.validateOutputs(p, ids, allIDs)
	if len(c.probs) == 0 {
		if cycle := findCycle(p); cycle != nil {
			i := ids[cycle[0]]
			c.at(stepPath(i, "id"), "dependency cycle: %s", strings.Join(cycle, " → "))
		}
	}
}

func (c *checker) validateJoin(i int, s *Step) {
	n := len(s.Deps)
	j := s.Join
	switch j.Policy {
	case JoinAll:
		if j.Min != 0 || j.Threshold != 0 {
			c.at(stepPath(i, "join"), "min and threshold apply to quorum joins only")
		}
	case JoinAny, JoinQuorum:
		if n == 0 {
			c.at(stepPath(i, "join"), "a %s join needs dependencies, and step %q has none", j.Policy, s.ID)
			return
		}
		if j.Policy == JoinAny {
			if j.Min != 0 || j.Threshold != 0 {
				c.at(stepPath(i, "join"), "min and threshold apply to quorum joins only")
			}
			return
		}
		switch {
		case j.Min == 0 && j.Threshold == 0:
			c.at(stepPath(i, "join"), "a quorum join needs min (a count) or threshold (0..1)")
		case j.Min != 0 && j.Threshold != 0:
			c.at(stepPath(i, "join"), "give min or threshold, not both")
		case j.Min > n:
			c.at(stepPath(i, "join", "min"), "quorum min %d exceeds the %d dependencies of step %q (%s)", j.Min, n, s.ID, strings.Join(s.Deps, ", "))
		}
	}
}

// findCycle returns one cycle as ids, first id repeated at the end.
func findCycle(p *Plan) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(id string) bool
	visit = func(id string) bool {
		color[id] = grey
		stack = append(stack, id)
		s := p.Step(id)
		for _, d := range s.Deps {
			switch color[d] {
			case grey:
				for k, x := range stack {
					if x == d {
						// Report in execution order: the dependency first.
						cyc := append([]string(nil), stack[k:]...)
						rev := make([]string, 0, len(cyc)+1)
						for m := len(cyc) - 1; m >= 0; m-- {
							rev = append(rev, cyc[m])
						}
						// Start at the smallest id so the message is stable.
						m0 := 0
						for m := range rev {
							if rev[m] < rev[m0] {
								m0 = m
							}
						}
						rev = append(rev[m0:], rev[:m0]...)
						found = append(rev, rev[0])
						return true
					}
				}
			case white:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
		return false
	}
	ids := make([]string, 0, len(p.Steps))
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if color[id] == white && visit(id) {
			return found
		}
	}
	return nil
}

// ResolveInputs applies defaults and validates request inputs against the
// plan's input schemas. An input without a default is required: when
// requireAll, a missing one is a problem; otherwise it is only listed in
// missing (checking a plan before its inputs are known). Unknown inputs
// and wrong values are always problems.
func (p *Plan) ResolveInputs(given map[string]any, requireAll bool) (values map[string]any, missing []string, probs caperr.Problems) {
	out := map[string]any{}
	for k, v := range given {
		if _, ok := p.Inputs[k]; !ok {
			probs = append(probs, caperr.New(caperr.InvalidInput, "unknown input %q%s (the plan takes: %s)", k, suggest.Phrase(k, p.InputNames()), strings.Join(p.InputNames(), ", ")).At("inputs", 0, 0, k))
			continue
		}
		out[k] = v
	}
	for _, name := range p.InputNames() {
		s := p.Inputs[name]
		v, ok := out[name]
		if !ok {
			d, has := s["default"]
			if !has {
				missing = append(missing, name)
				if requireAll {
					probs = append(probs, caperr.New(caperr.InvalidInput, "missing required input %q", name).At("inputs", 0, 0, name))
				}
				continue
			}
			v = d
			out[name] = v
		}
		compiled, vs := schema.Compile(s)
		if len(vs) > 0 {
			continue // reported by Parse
		}
		for _, viol := range compiled.Validate(v) {
			field := strings.Join(append([]string{name}, viol.Path...), ".")
			probs = append(probs, caperr.New(caperr.SchemaViolation, "input %s: %s", field, viol.Message).At("inputs", 0, 0, field))
		}
	}
	sort.SliceStable(probs, func(i, j int) bool { return probs[i].Field < probs[j].Field })
	return out, missing, probs
}

// Summary is a one-line description for messages.
func (p *Plan) Summary() string {
	return fmt.Sprintf("plan %s: %d steps, failure_policy %s", p.Name, len(p.Steps), p.FailurePolicy)
}

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

// reservedNames may not name a for_each item: roots of their own, and
// CEL's literals and reserved words (conditions could not read the item).
var reservedNames = map[string]bool{RefInputs: true, RefSteps: true, RefIndex: true,
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true, "continue": true,
	"else": true, "for": true, "function": true, "if": true, "import": true, "let": true, "loop": true, "package": true,
	"namespace": true, "return": true, "var": true, "void": true, "while": true}

// validateControl checks for_each, as, max_parallel, tolerate, when and
// the step's target (a capability).
func (c *checker) validateControl(i int, s *Step, refs *refChecker) {
	switch {
	case s.Capability == "" && s.Plan == "":
		c.at(stepPath(i), "step %q needs a capability (or a sub-plan: plan: FILE)", s.ID)
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

var whenStepRe = regexp.MustCompile(`\bsteps\s*(?:\.\s*([a-z0-9_]+)|\[\s*["']([a-z0-9_-]+)["']\s*\])`)

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
