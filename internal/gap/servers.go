package gap

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
)

// The runtime kit's builtins that name a server by the name a
// server.start step gave it, and the field that names it.
var namesServer = map[string]string{"server.wait_ready": "name", "server.stop": "name", "logs.collect": "sources"}

// servers checks that every step naming a server (server.wait_ready,
// server.stop, logs.collect by name) depends, directly or not, on the
// step that starts it: otherwise the plan is ready and fails at run time,
// or races the start. Names built from expressions are left to the run.
func (c *checker) servers() caperr.Problems {
	starts := map[string]string{} // server name -> the step that starts it
	for _, s := range c.p.Steps {
		// By capability too: a start step with a gap of its own has no
		// tool, and its gap is the problem to report, not its server.
		if c.builtin(s) == "server.start" || s.Capability == "server.start" {
			if name, ok := s.With["name"].(string); ok && !strings.Contains(name, "${") {
				starts[name] = s.ID
			}
		}
	}
	var out caperr.Problems
	for i, s := range c.p.Steps {
		field, ok := namesServer[c.builtin(s)]
		if !ok {
			continue
		}
		for _, name := range literalNames(s.With[field]) {
			starter, known := starts[name]
			at := fmt.Sprintf("steps[%d].with.%s", i, field)
			switch {
			case !known && field != "sources":
				out = append(out, caperr.New(caperr.InvalidInput, "step %s names server %q, which no step of the plan starts (server.start with name: %s)", s.ID, name, name).At(c.p.File, s.Line, 0, at))
			case known && !c.upstream(s, starter):
				out = append(out, caperr.New(caperr.InvalidInput, "step %s names server %q, started by step %s, which it does not depend on: add needs: [%s]", s.ID, name, starter, starter).At(c.p.File, s.Line, 0, at))
			}
		}
	}
	return out
}

// builtin is the builtin a step's chosen tool runs, or "".
func (c *checker) builtin(s *plan.Step) string {
	if m := c.tools[s.ID]; m != nil && m.Entrypoint.Type == manifest.EntryBuiltin {
		return m.Entrypoint.Name
	}
	return ""
}

func literalNames(v any) []string {
	var out []string
	switch t := v.(type) {
	case string:
		out = append(out, t)
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" || strings.Contains(s, "${") })
}

// upstream reports whether s depends on the step id, directly or not.
func (c *checker) upstream(s *plan.Step, id string) bool {
	seen := map[string]bool{}
	var walk func(*plan.Step) bool
	walk = func(x *plan.Step) bool {
		for _, d := range x.Deps {
			if d == id {
				return true
			}
			if !seen[d] {
				seen[d] = true
				if p := c.p.Step(d); p != nil && walk(p) {
					return true
				}
			}
		}
		return false
	}
	return walk(s)
}
