package yamldoc

import (
	"bytes"
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
		// A brace closed lines later is not "not closed": the parser's
		// words stand (a ',' is missing between entries).
		{"a multi-line mapping missing a comma", "name: x\nsteps:\n  - id: a\n    with: {\n      path: ok.yaml\n      mode: x\n    }\n", 6, "invalid YAML: ',' or '}' must be specified"},
		// The parser names the line above one indented too deep; "- "
		// counts as indentation of the item's keys.
		{"a key indented deeper than its siblings", "name: x\nsteps:\n  - id: a\n    capability: file.read\n      with: {path: ok.yaml}\n", 5, "line 5 is indented 6 spaces, the line above 4"},
		{"a top-level key indented", "name: w2\n  version: 1\n", 2, "line 2 is indented 2 spaces, the line above 0"},
		{"a key that left out its colon", "name: x\nsteps:\n  - id: a\n    capability file.checksum\n", 4, `line 4 has no ':' after "capability": a key and its value are written capability: VALUE`},
		{"an item's key that left out its colon", "name: x\nsteps:\n  - id a\n    capability: file.read\n", 3, `line 3 has no ':' after "id"`},
		// Hints a review found wrong: each is right now, or the parser's
		// words stand.
		{"tab-indented JSON missing a comma", "{\n\t\"name\": \"x\"\n\t\"steps\": [\n\t\t{\"id\": \"a\", \"capability\": \"t.r\"}\n\t]\n}\n", 3, "invalid YAML: ',' or '}' must be specified"},
		{"a tab inside a block scalar", "name: x\nsteps:\n  - id: a\n    with:\n      makefile: |\n        all:\n        \tgo build\n      lang make\n", 8, `line 8 has no ':' after "lang"`},
		{"a value holding ': ' under a commented key", "name: x\nsteps:\n  - id: a\n    with:  # inputs\n      template: Hello: world\n", 5, `the value of "template" on line 5 holds ': ', which YAML reads as another key: quote the value (template: "…")`},
		{"a value holding ': ' before its continuation", "name: x\ndescription: Usage: run it\n  every day\nsteps: []\n", 2, `the value of "description" on line 2 holds ': '`},
		{"a value ending in a comma is not a flow", "name: x\nsteps:\n  - id: a\n    with: x,\n      capability: t.r\n", 5, "line 5 is indented 6 spaces, the line above 4"},
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

// The hints read arbitrary bytes at any line the parser names: no panic
// (Parse would turn one into "cannot parse YAML"), and a place inside the
// text.
func FuzzHints(f *testing.F) {
	f.Add([]byte("a: {b: [c\n  d: e\n"), 2, 3, "',' or '}' must be specified")
	f.Add([]byte("a: {\n  x: [1, 2}\nb: 3\n"), 2, 11, "',' or ']' must be specified")
	f.Add([]byte("- id a\n\t- x\n  - y: 'it''s' # {\n"), 1, 1, "unexpected key name")
	f.Add([]byte("a: b\n    c: d\n"), 1, 4, "mapping value is not allowed in this context")
	f.Fuzz(func(t *testing.T, b []byte, line, col int, says string) {
		text := bytes.Split(b, []byte("\n"))
		lines := len(text)
		for _, complaint := range []string{"',' or '}' must be specified", "',' or ']' must be specified"} {
			if at, _, ok := unclosedFlow(text, line, col, complaint); ok && (at.Line < 1 || at.Line > lines || at.Line > line || at.Line == line && at.Column >= col) {
				t.Fatalf("unclosed bracket placed at %v for the parser's %d:%d", at, line, col)
			}
		}
		if hint, at := plainWords(text, line, says); hint != "" && (at < 1 || at > lines) {
			t.Fatalf("hint at line %d of %d", at, lines)
		}
	})
}

// An unclosed bracket is named where it opened, of the kind the parser
// asked to close, past quoted text of every kind; columns count
// characters, as the parser's do. Where the parser already names the
// bracket, its words stand.
func TestUnclosedBracketPlaces(t *testing.T) {
	for _, c := range []struct {
		name, src  string
		line, col  int
		want, none string
	}{
		{"the kind the parser asks for", "a: {\n  x: [1, 2}\nb: 3\n", 2, 6, "this '[' is not closed", ""},
		{"a brace inside a list", "a: [\n  {b: 1\n]\n", 2, 3, "this '{' is not closed", ""},
		{"'' inside single quotes", "a: 'it''s {'\nb: [1, 2\nc: 3\n", 2, 4, "this '[' is not closed", ""},
		{"a quote right after ':'", "a: {\"k\":\"v{\"}\nb: [1, 2\nc: 3\n", 2, 4, "this '[' is not closed", ""},
		{"an apostrophe starting a word", "description: the '90s\nnote: '{'\nsteps: [a\nb: c\n", 3, 8, "this '[' is not closed", ""},
		{"columns in characters", "name: x\nsteps:\n  - é: {id: a, capability: text.render\n  - id: b\n", 3, 8, "this '{' is not closed", ""},
		{"past a block scalar's brackets and quotes", "name: x\nsteps:\n  - id: a\n    with:\n      prompt: |\n        Answer with a list [like this\n        \"one\n    needs: [b\n  - id: b\n", 8, 12, "this '[' is not closed", ""},
		{"a dash inside a word", "name: x\ndescription: rock-'n-roll [live\nsteps: [a\nb: 1\n", 3, 8, "this '[' is not closed", ""},
		{"a tab before the parser's column", "x: [\"a\tb\", [1, 2}, [3]]\n", 0, 0, "", "is not closed"},
		{"the parser names it itself", "a: {\n  b: [1, 2\n", 0, 0, "", "is not closed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(c.src))
			ce := caperr.As(err, caperr.InternalError)
			if err == nil || !strings.Contains(ce.Message, c.want) || (c.none != "" && strings.Contains(ce.Message, c.none)) ||
				(c.line > 0 && (ce.Line != c.line || ce.Column != c.col)) {
				t.Fatalf("got %v (at %d:%d)", err, ce.Line, ce.Column)
			}
		})
	}
}
