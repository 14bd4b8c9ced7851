package gap

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/suggest"
)

// References: what a ${steps.X.data...} or ${inputs.X} names, and whether
// its producer returns it.

// refIssue is the issue of a reference that names nothing its producer
// returns, or whose data cannot be promised where cons (the consumer's
// schema there) needs something (false when it names what is there, or
// its producer is a gap reported on its own): the plan's typo when it is
// spelled near a field.
func (c *checker) refIssue(r plan.Ref, at string, cons map[string]any) (schema.Issue, bool) {
	_, issue, skip := c.refSchema(r)
	if skip || issue == "" || (unknown(issue) && len(cons) == 0) {
		return schema.Issue{}, false
	}
	if typo := c.refTypo(r); typo != "" {
		return schema.Issue{Path: at, Message: fmt.Sprintf("%s: %s", r, typo), Own: true, Ref: true}, true
	}
	return schema.Issue{Path: at, Message: fmt.Sprintf("%s: %s", r, issue), Producer: unpromised(r, issue, false)}, true
}

// unpromised is the step a reference reads where what it yields is only
// not promised (its data may be absent, or its producer declares no
// output_schema; Compat's Issue.Unpromised), "" for a plan input, a step
// that may be skipped (its when is what to look at) or a conflict (a type
// mismatch: another tool could take that type).
func unpromised(r plan.Ref, issue string, flagged bool) string {
	if r.Kind != plan.RefSteps || strings.Contains(issue, "may be skipped") || !flagged && !unknown(issue) {
		return ""
	}
	return r.Name
}

// unknown reports whether a reference's issue is only that its data may be
// absent or is not described (a producer with no output_schema): not a
// mistake of the plan, and a gap only where the consumer's schema needs
// what cannot be promised (schema.Compat says so).
func unknown(issue string) bool {
	return strings.Contains(issue, "may be") || strings.Contains(issue, "declares no output_schema")
}

// refSchema returns the schema of what a reference yields. skip is true
// when the producer is itself a gap (reported on its own).
func (c *checker) refSchema(r plan.Ref) (sch map[string]any, issue string, skip bool) {
	var base map[string]any
	path := refPath(r)
	switch r.Kind {
	case plan.RefInputs:
		base = c.p.Inputs[r.Name]
	case plan.RefIndex:
		return map[string]any{"type": "integer"}, "", false
	case plan.RefItem:
		if c.current == nil {
			return nil, "", true
		}
		item, issue := c.itemSchema(c.current)
		if issue != "" || item == nil {
			return nil, "", true // reported on for_each itself, or a literal list
		}
		base = item
	case plan.RefSteps:
		if r.Field == "success" {
			return map[string]any{"type": "boolean"}, "", false
		}
		if prod := c.p.Step(r.Name); prod != nil && prod.When != "" {
			return nil, fmt.Sprintf("step %s may be skipped (when: %s), so its data may be absent", r.Name, prod.When), false
		}
		var ok bool
		if base, ok = c.dataSchema(r.Name); !ok {
			return nil, "", true
		}
		if base == nil {
			return nil, fmt.Sprintf("%s declares no output_schema, so nothing is known of its data", c.tools[r.Name].ID()), false
		}
	}
	sub, guaranteed, issue := schema.Navigate(base, path)
	if issue != "" {
		return nil, issue, false
	}
	if !guaranteed {
		return nil, fmt.Sprintf("%q may be absent (the producer's schema does not require it)", strings.Join(path, ".")), false
	}
	if sub == nil {
		sub = map[string]any{}
	}
	return sub, "", false
}

// refPath is the data path a reference reads, as segments.
func refPath(r plan.Ref) []string {
	var path []string
	for _, p := range r.Path {
		path = append(path, p.String())
	}
	return path
}

// refTypo says, of a reference to a field its producer does not return
// but one it does is spelled nearly so, what the plan meant: a typo in the
// plan, not a gap ("" otherwise: the producer may need another tool).
func (c *checker) refTypo(r plan.Ref) string {
	if r.Kind != plan.RefSteps || r.Field == "success" {
		return ""
	}
	base, ok := c.dataSchema(r.Name)
	if !ok || base == nil {
		return ""
	}
	m := schema.Undeclared(base, refPath(r))
	if m == nil {
		return ""
	}
	by := "its sub-plan's outputs"
	if t := c.tools[r.Name]; t != nil {
		by = t.ID()
	}
	// A field its producer does not return is the plan's mistake whatever
	// the input it goes to takes (issue 54), with a near spelling when
	// there is one.
	if near := suggest.Typo(m.Field, m.Declared); near != "" {
		return fmt.Sprintf("step %s (%s) returns no field %q (did you mean %q?)", r.Name, by, m.Field, near)
	}
	return fmt.Sprintf("step %s (%s) returns no field %q (it returns %s)", r.Name, by, m.Field, schema.Declared(m.Declared))
}

// producers names, where every issue is about what an earlier step's
// output promises, those steps and their tools ("s (tok-maker@1.0.0)"):
// what to fix is that tool's output_schema or what the step takes from
// it, never a new tool for this step's capability (a trial was offered
// one in place of a core tool).
func (c *checker) producers(issues []schema.Issue) []string {
	var out []string
	for _, is := range issues {
		if is.Producer == "" {
			return nil
		}
		p := is.Producer
		if m := c.tools[p]; m != nil {
			p += " (" + m.ID() + ")"
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
