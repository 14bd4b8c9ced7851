package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml/token"

	"github.com/capflow/capflow/internal/caperr"
)

// plainWords says a YAML syntax error the way a person fixes it: a tab in
// the indentation, a key without its colon, a value holding ': ', a line
// indented unlike its neighbours; the parser's own words follow in
// parentheses. It returns the line to name, which is not always the
// parser's (an over-indented line is reported by the parser at the line
// above it), or "" when none of these explains it: a wrong hint is worse
// than the parser's words.
func plainWords(lines [][]byte, line int, parserSays string) (string, int) {
	if line < 1 || line > len(lines) {
		return "", line
	}
	if strings.Contains(parserSays, "\t") || strings.Contains(parserSays, "tab") {
		for n := line; n >= 1 && n >= line-1; n-- {
			if lead := leading(lines[n-1]); bytes.ContainsRune(lead, '\t') {
				return fmt.Sprintf("line %d is indented with a tab: YAML indents with spaces only, replace the tab with spaces (the parser says: %s)", n, strings.ReplaceAll(parserSays, "\t", `\t`)), n
			}
		}
	}
	this := lines[line-1]
	if key := colonless(this); key != "" && (strings.Contains(parserSays, "non-map value") || strings.Contains(parserSays, "unexpected key name")) {
		return fmt.Sprintf("line %d has no ':' after %q: a key and its value are written %s: VALUE (the parser says: %s)", line, key, key, parserSays), line
	}
	if !strings.Contains(parserSays, "mapping value is not allowed") {
		return deeperThanAbove(lines, line, parserSays)
	}
	if key := colonInValue(this); key != "" {
		return fmt.Sprintf("the value of %q on line %d holds ': ', which YAML reads as another key: quote the value (%s: \"…\") (the parser says: %s)", key, line, key, parserSays), line
	}
	// The parser names the line above one indented too deep (a key under
	// a key that has its value already).
	if line < len(lines) && !opens(this) && keyLine.Match(lines[line]) {
		if is, was := indents(lines[line], this); is > was {
			return deeper(line+1, is, was, parserSays), line + 1
		}
	}
	return deeperThanAbove(lines, line, parserSays)
}

// deeperThanAbove names the parser's line when it is indented deeper than
// the line above it, which does not open a block.
func deeperThanAbove(lines [][]byte, line int, parserSays string) (string, int) {
	for n := line - 1; n >= 1; n-- {
		prev := lines[n-1]
		if t := bytes.TrimSpace(prev); len(t) == 0 || t[0] == '#' {
			continue
		}
		if is, was := indents(lines[line-1], prev); is > was && !opens(prev) {
			return deeper(line, is, was, parserSays), line
		}
		return "", line
	}
	return "", line
}

func deeper(line, is, was int, parserSays string) string {
	return fmt.Sprintf("line %d is indented %d spaces, the line above %d: a line of the same list or mapping is indented as its siblings are (the parser says: %s)", line, is, was, parserSays)
}

// leading is a line's indentation: its leading spaces and tabs.
func leading(l []byte) []byte {
	return l[:len(l)-len(bytes.TrimLeft(l, " \t"))]
}

// indent is where a line's content starts: its leading spaces and each
// "- " of the list items it opens ("  - id: a" is indented 4, as the keys
// of that item below it are).
func indent(l []byte) int {
	n := len(leading(l))
	for rest := l[n:]; bytes.HasPrefix(rest, []byte("- ")); rest = l[n:] {
		n += 2 + len(leading(rest[2:]))
	}
	return n
}

// indents are the indentations of a line and the one above it to compare:
// where their dashes are when both are list items, else where each one's
// content starts.
func indents(l, above []byte) (int, int) {
	if item(l) && item(above) {
		return len(leading(l)), len(leading(above))
	}
	return indent(l), indent(above)
}

// item reports whether a line is a list item ("- ...").
func item(l []byte) bool {
	t := bytes.TrimLeft(l, " \t")
	return bytes.HasPrefix(t, []byte("- ")) || bytes.Equal(bytes.TrimRight(t, " \r"), []byte("-"))
}

// opens reports whether a line goes on below it: it opens a block (ends
// with ':' or is a bare '-', a comment, anchor or tag aside) or a flow
// left open ('{', '[').
func opens(l []byte) bool {
	t := content(l)
	return len(t) > 0 && strings.IndexByte(":-{[", t[len(t)-1]) >= 0
}

// content is a line without its trailing comment, anchor or tag.
func content(l []byte) []byte {
	t := l
	if i := bytes.Index(t, []byte(" #")); i >= 0 {
		t = t[:i]
	}
	t = bytes.TrimRight(t, " \t\r")
	if i := bytes.LastIndexByte(t, ' '); i >= 0 && i+1 < len(t) && (t[i+1] == '&' || t[i+1] == '!') {
		t = bytes.TrimRight(t[:i], " \t")
	}
	return t
}

var (
	// keyWithoutColon is a line that reads as a key and a one-word value
	// with the colon left out: "capability file.read", "- id a".
	keyWithoutColon = regexp.MustCompile(`^\s*(?:-\s+)*([A-Za-z_][A-Za-z0-9_-]*)\s+[^\s#:]\S*\s*$`)
	// keyLine is a line that starts with a key.
	keyLine = regexp.MustCompile(`^\s*(?:-\s+)*[A-Za-z_][A-Za-z0-9_.-]*:(?:\s|$)`)
	// keyAndPlainValue is a key and a plain value (not quoted, a flow, a
	// block scalar, an alias, anchor or tag).
	keyAndPlainValue = regexp.MustCompile(`^\s*(?:-\s+)*([A-Za-z_][A-Za-z0-9_.-]*):\s+([^\s"'{\[|>&*!#].*)$`)
	// blockHeader ends a line whose value is a block scalar ("run: |").
	blockHeader = regexp.MustCompile(`(?:^|\s)[|>][-+]?[1-9]?[-+]?$`)
)

// colonless is the key of a line that left out its colon, or "".
func colonless(l []byte) string {
	if m := keyWithoutColon.FindSubmatch(bytes.TrimRight(l, "\r")); m != nil {
		return string(m[1])
	}
	return ""
}

// colonInValue is the key of a line whose plain value holds ': ', or "".
func colonInValue(l []byte) string {
	if m := keyAndPlainValue.FindSubmatch(content(l)); m != nil && bytes.Contains(m[2], []byte(": ")) {
		return string(m[1])
	}
	return ""
}

// unclosedFlow finds the '{' or '[' left open where the parser gave up
// (line:col), when it gave up for want of a ',' or that closing bracket:
// the parser names where it noticed, often the line after, where the fix
// is not. Quoted text, comments and block scalars are skipped, and a
// bracket closed later in the file (a missing ',' between entries) is not
// named. Columns count characters, as the parser's do.
func unclosedFlow(lines [][]byte, line, col int, parserSays string) (Pos, byte, bool) {
	want := map[string]byte{"',' or '}' must be specified": '{', "',' or ']' must be specified": '['}[parserSays]
	if want == 0 {
		return Pos{}, 0, false
	}
	var open []Pos
	var kinds []byte
	var quote byte
	depth, at, taken := 0, Pos{}, false // the innermost bracket open where the parser gave up
	take := func() {
		if taken = true; len(open) > 0 {
			depth, at = len(open), open[len(open)-1]
		}
	}
	block := -1 // a block scalar's lines are indented deeper than this
	for n, text := range lines {
		l := n + 1
		if block >= 0 && (len(bytes.TrimSpace(text)) == 0 || len(leading(text)) > block) {
			continue
		}
		block = -1
		for i, c := 0, 0; i < len(text); i++ {
			b := text[i]
			if b&0xC0 != 0x80 { // not a UTF-8 continuation byte
				c++
			}
			if !taken && (l > line || l == line && c >= col) {
				take()
			}
			switch {
			case quote == '"' && b == '\\' && i+1 < len(text):
				i, c = i+1, c+1
			case quote == '\'' && b == '\'' && i+1 < len(text) && text[i+1] == '\'':
				i, c = i+1, c+1 // '' is a quote inside single quotes
			case quote != 0 && b == quote:
				quote = 0
			case quote != 0:
			case (b == '"' || b == '\'') && scalarStarts(text, i):
				quote = b
			case b == '#' && (i == 0 || text[i-1] == ' ' || text[i-1] == '\t'):
				i = len(text) // a comment, to the end of the line
			case b == '{' || b == '[':
				open, kinds = append(open, Pos{l, c}), append(kinds, b)
			case len(open) > 0 && b == flows[kinds[len(kinds)-1]].close:
				open, kinds = open[:len(open)-1], kinds[:len(kinds)-1]
			}
		}
		if quote == 0 && len(open) == 0 && blockHeader.Match(content(text)) {
			block = len(leading(text))
		}
	}
	if !taken {
		take() // the parser gave up at the end
	}
	if depth == 0 || len(open) < depth || open[depth-1] != at || kinds[depth-1] != want {
		return Pos{}, 0, false // nothing of that kind open there, or closed later
	}
	if at.Line == line && line <= len(lines) && bytes.IndexByte(lines[line-1], '\t') >= 0 {
		return Pos{}, 0, false // a tab throws the parser's column off: not sure of the bracket
	}
	return at, want, true
}

// flows are YAML's flow collections by their opening bracket.
var flows = map[byte]struct {
	name  string
	close byte
}{'{': {"mapping", '}'}, '[': {"list", ']'}}

// scalarStarts reports whether a quote at text[i] opens a quoted scalar:
// it comes first on its line or after a key's ':', an item's "- " or a
// flow indicator, spaces aside ("it's", "the '90s" and "rock-'n-roll" are
// plain text).
func scalarStarts(text []byte, i int) bool {
	j := i - 1
	for j >= 0 && (text[j] == ' ' || text[j] == '\t') {
		j--
	}
	switch {
	case j < 0:
		return true
	case text[j] == '-':
		return j+1 < i // "- 'x'", not "rock-'n"
	default:
		return strings.IndexByte(":[{,", text[j]) >= 0
	}
}

// syntaxError tells a parser's syntax error at its file, line and column,
// in plain words where plainWords or unclosedFlow know them.
func syntaxError(file string, data []byte, err error) error {
	line, col := 0, 0
	var se interface {
		GetMessage() string
		GetToken() *token.Token
	}
	var msg string
	if errors.As(err, &se) {
		// Not Error(): goccy's prints the tokens of the error's lines, each
		// appended to a growing string (an unclosed list of 150,000 items
		// took 12 s to say so).
		msg = se.GetMessage()
		if t := se.GetToken(); t != nil && t.Position != nil {
			line, col = t.Position.Line, t.Position.Column
		}
	} else {
		msg = err.Error()
	}
	// goccy's message starts with "[line:col] "; keep only the text.
	if i := strings.Index(msg, "] "); strings.HasPrefix(msg, "[") && i > 0 {
		if line == 0 {
			fmt.Sscanf(msg, "[%d:%d]", &line, &col)
		}
		msg = msg[i+2:]
	}
	if j := strings.IndexByte(msg, '\n'); j > 0 {
		msg = msg[:j]
	}
	msg = strings.TrimSpace(msg)
	lines := bytes.Split(data, []byte("\n"))
	if at, b, ok := unclosedFlow(lines, line, col, msg); ok {
		return caperr.New(caperr.InvalidInput, "invalid YAML: this %q is not closed: close the flow %s with %q (the parser, at line %d, says: %s)",
			b, flows[b].name, flows[b].close, line, msg).At(file, at.Line, at.Column, "")
	}
	if plain, at := plainWords(lines, line, msg); plain != "" {
		if at != line {
			line, col = at, indent(lines[at-1])+1
		}
		return caperr.New(caperr.InvalidInput, "invalid YAML: %s", plain).At(file, line, col, "")
	}
	return caperr.New(caperr.InvalidInput, "invalid YAML: %s", msg).At(file, line, col, "")
}
