package builtin

import (
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

// A query or template that cannot parse, written in the plan as it is, is
// found before a run, at its field; one a plan expression fills in, or any
// other builtin's input, is left to the run.
func TestCheckLiteral(t *testing.T) {
	for _, c := range []struct {
		builtin      string
		in           map[string]any
		field, error string
	}{
		{"json.query", map[string]any{"query": ".a | foo("}, "query", `query ".a | foo(": unexpected EOF`},
		{"json.query", map[string]any{"query": "nosuch(1)"}, "query", "function not defined: nosuch/1"},
		{"json.query", map[string]any{"query": ".a[] | select(. > 1)"}, "", ""},
		{"json.query", map[string]any{"query": "${steps.a.data.q} | foo("}, "", ""},
		{"json.query", map[string]any{"query": strings.Repeat("(", maxQuery+1)}, "", ""}, // the run refuses its size
		{"text.render", map[string]any{"template": "hi {{.who"}, "template", "unclosed action"},
		{"text.render", map[string]any{"template": "{{nosuch .}}"}, "template", `function "nosuch" not defined`},
		{"text.render", map[string]any{"template": "{{template \"t\"}}{{define \"t\"}}{{template \"t\"}}{{end}}"}, "template", "calls itself"},
		{"text.render", map[string]any{"template": "hi {{.who}} {{upper .x}}"}, "", ""},
		{"text.render", map[string]any{"template": "no action here"}, "", ""},
		{"text.render", map[string]any{"template": "${inputs.t} {{.who"}, "", ""},
		{"file.read", map[string]any{"query": "foo("}, "", ""},
	} {
		field, err := CheckLiteral(c.builtin, c.in)
		if field != c.field || (err == nil) != (c.error == "") || err != nil && (caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), c.error)) {
			t.Errorf("%s %.40v: %q %v, want %q %q", c.builtin, c.in, field, err, c.field, c.error)
		}
	}
}
