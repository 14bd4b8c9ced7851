package agent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
)

// Lines are calls one line each, for people: step, capability, tool,
// arguments (cut at 200 bytes).
func Lines(calls []Call) []string {
	var out []string
	for _, c := range calls {
		what := cmp.Or(c.Capability, c.Function)
		args := ""
		if c.Arguments != nil {
			args = Shown(c.Arguments)
		}
		out = append(out, strings.Join(strings.Fields(fmt.Sprintf("%s %s %s %s", c.Step, what, c.Tool, args)), " "))
	}
	return out
}

// maxShown bounds one argument's value as people see it: every argument
// is shown, each long value cut, so none hides another.
const maxShown = 120

// Shown is args as people read them (a call line, a gate's prompt): JSON
// with every string past maxShown bytes cut, saying how long it was.
func Shown(args map[string]any) string {
	b, _ := json.Marshal(cut(args))
	return string(b)
}

func cut(v any) any {
	switch t := v.(type) {
	case string:
		if len(t) > maxShown {
			return fmt.Sprintf("%s…(%d bytes)", t[:maxShown], len(t))
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[cut(k).(string)] = cut(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = cut(x)
		}
		return out
	}
	return v
}
