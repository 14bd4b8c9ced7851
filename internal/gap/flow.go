package gap

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/suggest"
)

// schemaIssues checks the step's capability contract against the tool,
// then the data flowing into each of the tool's inputs.
func (c *checker) schemaIssues(s *plan.Step, m *manifest.Manifest) []schema.Issue {
	c.current = s
	defer func() { c.current = nil }()
	var out []schema.Issue
	if s.IsForEach() {
		if _, issue := c.itemSchema(s); issue != "" {
			out = append(out, schema.Issue{Path: "for_each", Message: issue})
		}
	}
	if cc := s.CapabilityContract; cc != nil {
		if cc.InputSchema != nil {
			for _, is := range schema.Compat(cc.InputSchema, m.InputSchema) {
				is.Path = prefix("capability_contract.input_schema", is.Path)
				out = append(out, is)
			}
		}
		if cc.OutputSchema != nil {
			for _, is := range schema.Compat(m.OutputSchema, cc.OutputSchema) {
				is.Path = prefix("capability_contract.output_schema", is.Path)
				out = append(out, is)
			}
		}
	}
	in := m.InputSchema
	props, _ := in["properties"].(map[string]any)
	keys := make([]string, 0, len(s.With))
	for k := range s.With {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	known := slices.Sorted(maps.Keys(props))
	said := map[string]bool{} // keys a missing input's problem names
	for _, r := range requiredOf(in) {
		if _, ok := s.With[r]; !ok {
			msg := fmt.Sprintf("%s requires input %q and the step does not supply it", m.Name, r)
			if k := misspelt(r, keys, props); k != "" {
				msg += fmt.Sprintf(" (the step gives %q: a misspelling?)", k)
				said[k] = true
			}
			out = append(out, schema.Issue{Path: "with." + r, Message: msg, Own: true})
		}
	}
	for _, k := range keys {
		ps, declared := props[k].(map[string]any)
		if !declared && said[k] {
			continue
		}
		if !declared {
			if ap, ok := in["additionalProperties"].(bool); ok && !ap {
				out = append(out, schema.Issue{Path: "with." + k, Message: fmt.Sprintf("%s takes no input %q (it takes %s)", m.Name, k, strings.Join(known, ", ")), Own: true, Key: k, Known: known})
			} else if near := suggest.Typo(k, known); near != "" {
				// Open to other keys, but this one is a declared one
				// misspelt: the tool would never see the value.
				out = append(out, schema.Issue{Path: "with." + k, Message: fmt.Sprintf("%s takes no input %q (did you mean %q?)", m.Name, k, near), Own: true, Key: k, Known: known})
			} else {
				// Open to other keys: what its references name must be
				// there whatever the tool takes (issue 54).
				apm, _ := in["additionalProperties"].(map[string]any)
				out = append(out, c.flow(s.With[k], apm, "with."+k)...)
			}
			continue
		}
		out = append(out, c.flow(s.With[k], ps, "with."+k)...)
	}
	return out
}

// misspelt is the step's key that looks like required input r misspelt
// (one the tool does not declare), or "".
func misspelt(r string, keys []string, props map[string]any) string {
	for _, k := range keys {
		if _, declared := props[k]; !declared && suggest.Typo(k, []string{r}) == r {
			return k
		}
	}
	return ""
}

func prefix(p, rest string) string {
	if rest == "" {
		return p
	}
	return p + "." + rest
}

func requiredOf(s map[string]any) []string {
	var out []string
	if l, ok := s["required"].([]any); ok {
		for _, x := range l {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
	}
	sort.Strings(out)
	return out
}

// hasRefs reports whether a with-value contains any reference.
func hasRefs(v any) bool {
	found := false
	plan.CollectRefs(v, nil, func(_ []string, tpl plan.Template, err error) {
		if err == nil && len(tpl.Refs()) > 0 {
			found = true
		}
	})
	return found
}

// flow checks one with-value against the consumer's schema.
func (c *checker) flow(v any, cons map[string]any, at string) []schema.Issue {
	if !hasRefs(v) {
		return c.literal(v, cons, at)
	}
	switch t := v.(type) {
	case string:
		tpl, _ := plan.ParseTemplate(t)
		if !tpl.IsSingleRef() {
			// Text around references: each must still name what is there.
			out := prefixed(at, schema.Compat(map[string]any{"type": "string"}, cons))
			for _, r := range tpl.Refs() {
				if is, bad := c.refIssue(r, at, nil); bad {
					out = append(out, is)
				}
			}
			return out
		}
		prod, _, skip := c.refSchema(*tpl[0].Ref)
		if skip {
			return nil
		}
		if is, bad := c.refIssue(*tpl[0].Ref, at, cons); bad {
			return []schema.Issue{is}
		}
		issues := schema.Compat(prod, cons)
		if r := *tpl[0].Ref; r.Kind == plan.RefInputs && len(issues) > 0 && len(schema.Compat(withBounds(prod, cons), cons)) == 0 {
			// The plan's own input, declared wider than the tool takes:
			// the plan's to fix (one problem, with the fix), not a tool
			// to write.
			var says []string
			for _, is := range issues {
				says = append(says, strings.NewReplacer("the consumer", "the tool", "the producer does not guarantee", "the input does not declare").Replace(is.Message))
			}
			return []schema.Issue{{Path: at, Own: true, Ref: true, Message: fmt.Sprintf("%s: the plan's input %q is declared wider than the tool takes it (%s); %s",
				tpl[0].Ref, r.Name, strings.Join(says, "; "), c.narrowInput(r.Name, cons))}}
		}
		var out []schema.Issue
		for _, is := range issues {
			is.Message = fmt.Sprintf("%s: %s", tpl[0].Ref, is.Message)
			is.Path = prefix(at, is.Path)
			if is.Unpromised {
				is.Producer = unpromised(*tpl[0].Ref, is.Message, true)
			}
			out = append(out, is)
		}
		return out
	case map[string]any:
		var out []schema.Issue
		props, _ := cons["properties"].(map[string]any)
		for _, r := range requiredOf(cons) {
			if _, ok := t[r]; !ok {
				out = append(out, schema.Issue{Path: at + "." + r, Message: "required field missing"})
			}
		}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			ps, _ := props[k].(map[string]any) // none: its references are still checked
			out = append(out, c.flow(t[k], ps, at+"."+k)...)
		}
		return out
	case []any:
		var out []schema.Issue
		items, _ := cons["items"].(map[string]any)
		for i, x := range t {
			out = append(out, c.flow(x, items, fmt.Sprintf("%s.%d", at, i))...)
		}
		return out
	}
	return nil
}

// bounds are the keywords that narrow a value, which a plan input passed
// to a tool must declare as the tool's schema does.
var bounds = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "enum", "minItems", "maxItems"}

// withBounds is schema s with the bounds of cons it lacks.
func withBounds(s, cons map[string]any) map[string]any {
	out := maps.Clone(s)
	if out == nil {
		out = map[string]any{}
	}
	for _, k := range bounds {
		if v, ok := cons[k]; ok {
			if _, has := out[k]; !has {
				out[k] = v
			}
		}
	}
	return out
}

// narrowInput is the fix of a plan input wider than the tool's schema:
// its declaration with the tool's bounds it lacks.
func (c *checker) narrowInput(name string, cons map[string]any) string {
	js, _ := json.Marshal(withBounds(c.p.Inputs[name], cons))
	return fmt.Sprintf("declare the input as the tool takes it: inputs: {%s: %s}", name, js)
}

func prefixed(at string, issues []schema.Issue) []schema.Issue {
	for i := range issues {
		issues[i].Path = prefix(at, issues[i].Path)
	}
	return issues
}

// literal validates a constant value with the real validator.
func (c *checker) literal(v any, cons map[string]any, at string) []schema.Issue {
	if len(cons) == 0 {
		return nil
	}
	s := c.compiled(cons)
	if s == nil {
		return nil // the tool's own schema problem is reported by validate
	}
	var out []schema.Issue
	for _, viol := range s.Validate(v) {
		out = append(out, schema.Issue{Path: prefix(at, strings.Join(viol.Path, ".")), Message: "literal value: " + viol.Message, Own: true})
	}
	return out
}

// valueSchema infers a schema for a with-value (for proposed contracts).
func (c *checker) valueSchema(v any) map[string]any {
	switch t := v.(type) {
	case string:
		tpl, err := plan.ParseTemplate(t)
		if err == nil && tpl.IsSingleRef() {
			if s, issue, skip := c.refSchema(*tpl[0].Ref); !skip && issue == "" && s != nil {
				return copyTypeOnly(s)
			}
			return map[string]any{}
		}
		return map[string]any{"type": "string"}
	case bool:
		return map[string]any{"type": "boolean"}
	case int64, uint64, int:
		return map[string]any{"type": "integer"}
	case float64:
		if t == math.Trunc(t) {
			return map[string]any{"type": "integer"}
		}
		return map[string]any{"type": "number"}
	case []any:
		return map[string]any{"type": "array"}
	case map[string]any:
		return map[string]any{"type": "object"}
	}
	return map[string]any{}
}

// dataSchema is the schema of a step's data: its tool's output schema, or
// for a for_each step the aggregate {count, succeeded, failed, items}.
// ok is false when the step has no tool (a gap, reported on its own).
func (c *checker) dataSchema(id string) (map[string]any, bool) {
	if sc := c.subs[id]; sc != nil {
		return sc.outputsSchema(), true
	}
	if s := c.p.Step(id); s != nil && s.Agent != nil {
		// An agent's data is its finish call's arguments.
		return s.OutputSchema, s.OutputSchema != nil
	}
	m := c.tools[id]
	if m == nil {
		return nil, false
	}
	if s := c.p.Step(id); s != nil && s.IsForEach() {
		return ForEachData(m.OutputSchema), true
	}
	return m.OutputSchema, true
}

// ForEachData is the schema of a for_each step's data given its tool's
// output schema (docs/plans.md).
func ForEachData(item map[string]any) map[string]any {
	if item == nil {
		item = map[string]any{}
	}
	n := map[string]any{"type": "integer", "minimum": 0}
	return map[string]any{"type": "object", "required": []any{"count", "succeeded", "failed", "items"},
		"properties": map[string]any{"count": n, "succeeded": n, "failed": n, "skipped": n,
			"items": map[string]any{"type": "array", "items": map[string]any{"anyOf": []any{item, map[string]any{"type": "null"}}}}}}
}

// itemSchema is the schema of one item of a for_each step: the element
// schema of its source list. issue says why the source is not a list; a
// nil schema with no issue means unknown (a literal list, or a gap).
func (c *checker) itemSchema(s *plan.Step) (map[string]any, string) {
	src, ok := s.ForEach.(string)
	if !ok {
		return nil, ""
	}
	tpl, err := plan.ParseTemplate(src)
	if err != nil || !tpl.IsSingleRef() {
		return nil, ""
	}
	saved := c.current
	c.current = nil
	list, issue, skip := c.refSchema(*tpl[0].Ref)
	c.current = saved
	switch {
	case skip:
		return nil, ""
	case issue != "":
		return nil, fmt.Sprintf("for_each %s: %s", tpl[0].Ref, issue)
	}
	if t, _ := list["type"].(string); t != "array" && t != "" {
		return nil, fmt.Sprintf("for_each %s is a %s, not a list", tpl[0].Ref, t)
	}
	if t, _ := list["type"].(string); t == "" && len(list) > 0 {
		return nil, fmt.Sprintf("for_each %s: the producer does not declare it a list (type: array)", tpl[0].Ref)
	}
	item, _ := list["items"].(map[string]any)
	if item == nil {
		item = map[string]any{}
	}
	return item, ""
}

// compiled is cons compiled, or nil when it does not compile. The schemas
// are the tools' own maps, shared by every step of a tool and never
// changed after loading: one compilation each per check (a 500-step plan
// compiled the same schema 500 times).
func (c *checker) compiled(cons map[string]any) *schema.Schema {
	key := reflect.ValueOf(cons).UnsafePointer()
	if s, ok := c.schemas[key]; ok {
		return s
	}
	s, vs := schema.Compile(cons)
	if len(vs) > 0 {
		s = nil
	}
	if c.schemas == nil {
		c.schemas = map[unsafe.Pointer]*schema.Schema{}
	}
	c.schemas[key] = s
	return s
}
