package yamldoc

import (
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

// YAML mistakes are said in a person's words, at their line.
func TestSyntaxErrorsInPlainWords(t *testing.T) {
	for _, c := range []struct {
		name, src string
		line      int
		want      string
	}{
		{"a tab", "name: x\nsteps:\n\t- {id: a}\n", 3, "line 3 is indented with a tab: YAML indents with spaces only, replace the tab with spaces (the parser says: found character '\\t'"},
		{"a sibling indented deeper", "name: x\nsteps:\n  - {id: a}\n   - {id: b}\n", 4, "line 4 is indented 3 spaces, the line above 2: a line of the same list or mapping is indented as its siblings are"},
		{"other mistakes keep the parser's words", "name: [x\n", 0, "invalid YAML: "},
		// The parser names the line after an unclosed bracket; the fix is
		// where it opened.
		{"an unclosed brace", "name: x\nsteps:\n  - {id: a, capability: text.render, with: {template: ok}\n  - id: b\n", 3, "this '{' is not closed: close the flow mapping with '}'"},
		{"an unclosed bracket past quotes and comments", "name: \"{x\"\n# {\nnote: it's [fine]\nsteps:\n  - [a, b\n  - c\n", 5, "this '[' is not closed: close the flow list with ']'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(c.src))
			ce := caperr.As(err, caperr.InternalError)
			if err == nil || !strings.Contains(ce.Message, c.want) || (c.line > 0 && ce.Line != c.line) {
				t.Fatalf("got %v (line %d)", err, ce.Line)
			}
		})
	}
}
