package agent

import (
	"cmp"
	"crypto/sha256"
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
// with every string past maxShown bytes cut, saying how long it was (a
// key cut keeps a digest of the whole: two never show as one), and
// direction controls written as escapes (they would reorder the text).
func Shown(args map[string]any) string {
	b, _ := json.Marshal(cut(args))
	return bidi.Replace(string(b))
}

var bidi = strings.NewReplacer("\u202a", `\u202a`, "\u202b", `\u202b`, "\u202c", `\u202c`, "\u202d", `\u202d`, "\u202e", `\u202e`,
	"\u2066", `\u2066`, "\u2067", `\u2067`, "\u2068", `\u2068`, "\u2069", `\u2069`, "\u200e", `\u200e`, "\u200f", `\u200f`)

func cut(v any) any {
	switch t := v.(type) {
	case string:
		if len(t) > maxShown {
			return fmt.Sprintf("%s…(%d bytes)", t[:maxShown], len(t))
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			key := k
			if len(k) > maxShown {
				sum := sha256.Sum256([]byte(k))
				key = fmt.Sprintf("%s…(%d bytes, sha256:%x)", k[:maxShown], len(k), sum[:6])
			}
			out[key] = cut(x)
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
