package plan

import (
	"sort"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/suggest"
)

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
		fromDefault := !ok
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
			e := caperr.New(caperr.SchemaViolation, "%s", viol.Message).At("inputs", 0, 0, field)
			if fromDefault {
				// The plan's own default: said where it is written.
				p.Place(e, append([]string{"inputs", name, "default"}, viol.Path...)...)
			}
			probs = append(probs, e)
		}
	}
	sort.SliceStable(probs, func(i, j int) bool { return probs[i].Field < probs[j].Field })
	return out, missing, probs
}
