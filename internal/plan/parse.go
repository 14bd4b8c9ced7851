package plan

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/suggest"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/schemas"
	"github.com/capflow/capflow/wire"
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
	p, probs := Parse(name, b)
	if p != nil {
		// Lines of the JSON written here, all 1: no file has them.
		for _, s := range p.Steps {
			s.Line, s.WhenLine, s.WhenColumn = 0, 0, 0
		}
	}
	return p, probs
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
			_, hasCap := m["capability"]
			_, hasPlan := m["plan"]
			_, hasAgent := m["agent"]
			if !hasCap && !hasPlan && !hasAgent {
				c.at(stepPath(i), "step needs a capability (or a sub-plan: plan: FILE, or an agent: block)")
			}
		}
		c.rawKeys(steps)
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
		if s.Agent != nil {
			s.Agent.withDefaults()
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

// stepKeys is what the id and needs checks read of a step: of a parsed
// plan, or of the document the schema refused, so that those problems
// come with the schema's and not in a later round.
type stepKeys struct {
	id    string
	needs []string
}

// checkIDs refuses duplicate and reserved step ids; it returns each id's
// step index and the ids in order.
func (c *checker) checkIDs(steps []stepKeys) (map[string]int, []string) {
	ids := map[string]int{}
	var allIDs []string
	for i, s := range steps {
		if first, dup := ids[s.id]; dup {
			c.at(stepPath(i, "id"), "duplicate step id %q (first used by steps[%d])", s.id, first)
			continue
		}
		if end := wire.ReservedEnding(s.id); end != "" {
			c.at(stepPath(i, "id"), "step id %q ends in %q, which capflow adds to a step's activity IDs (a retried, rerun, moved or local-then-regular step's): rename the step", s.id, end)
		}
		ids[s.id] = i
		allIDs = append(allIDs, s.id)
	}
	return ids, allIDs
}

// checkNeeds refuses a step's needs of itself or of no step; it returns
// the steps it needs.
func (c *checker) checkNeeds(i int, s stepKeys, ids map[string]int, allIDs []string) map[string]bool {
	deps := map[string]bool{}
	for j, n := range s.needs {
		switch _, ok := ids[n]; {
		case n == s.id:
			c.at(stepPath(i, "needs", strconv.Itoa(j)), "step %q cannot need itself", s.id)
		case !ok:
			c.at(stepPath(i, "needs", strconv.Itoa(j)), "needs unknown step %q%s", n, suggest.Phrase(n, allIDs))
		default:
			deps[n] = true
		}
	}
	return deps
}

// rawKeys checks ids and needs in a document the schema refused, where
// every step has a string id (a step without one would make its needers'
// needs look unknown).
func (c *checker) rawKeys(steps []any) {
	keys := make([]stepKeys, len(steps))
	for i, st := range steps {
		m, _ := st.(map[string]any)
		id, ok := m["id"].(string)
		if !ok || id == "" {
			return
		}
		keys[i].id = id
		needs, _ := m["needs"].([]any)
		for _, n := range needs {
			if n, ok := n.(string); ok {
				keys[i].needs = append(keys[i].needs, n)
			}
		}
	}
	ids, allIDs := c.checkIDs(keys)
	for i, k := range keys {
		c.checkNeeds(i, k, ids, allIDs)
	}
}

func (c *checker) validate(p *Plan) {
	keys := make([]stepKeys, len(p.Steps))
	for i, s := range p.Steps {
		keys[i] = stepKeys{s.ID, s.Needs}
	}
	ids, allIDs := c.checkIDs(keys)
	for name, s := range p.Inputs {
		if _, vs := schema.Compile(s); len(vs) > 0 {
			c.at([]string{"inputs", name}, "input %q is not a valid JSON Schema: %s", name, vs[0].Message)
		}
	}
	for i, s := range p.Steps {
		deps := c.checkNeeds(i, keys[i], ids, allIDs)
		refs := refChecker{c: c, p: p, s: s, ids: ids, allIDs: allIDs, deps: deps}
		refs.item = s.IsForEach()
		CollectRefs(s.With, nil, func(path []string, tpl Template, err error) {
			refs.check(stepPath(i, append([]string{"with"}, path...)...), tpl, err)
		})
		c.validateControl(i, s, &refs)
		c.validateAgent(i, s, &refs)
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

// Summary is a one-line description for messages.
func (p *Plan) Summary() string {
	return fmt.Sprintf("plan %s: %d steps, failure_policy %s", p.Name, len(p.Steps), p.FailurePolicy)
}

// reservedNames may not name a for_each item: roots of their own, and
// CEL's literals and reserved words (conditions could not read the item).
var reservedNames = map[string]bool{RefInputs: true, RefSteps: true, RefIndex: true,
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true, "continue": true,
	"else": true, "for": true, "function": true, "if": true, "import": true, "let": true, "loop": true, "package": true,
	"namespace": true, "return": true, "var": true, "void": true, "while": true}

var whenStepRe = regexp.MustCompile(`\bsteps\s*(?:\.\s*([a-z0-9_]+)|\[\s*["']([a-z0-9_-]+)["']\s*\])`)
