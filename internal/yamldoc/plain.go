package yamldoc

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// plainWords says a YAML syntax error the way a person fixes it: a tab in
// the indentation, a key without its colon, a line indented unlike its
// neighbours; the parser's own words follow in parentheses. It returns
// the line to name, which is not always the parser's (an over-indented
// line is reported by the parser at the line above it), or "" when none
// of these explains it.
func plainWords(data []byte, line int, parserSays string) (string, int) {
	lines := bytes.Split(data, []byte("\n"))
	if line < 1 || line > len(lines) {
		return "", line
	}
	for n := line; n >= 1 && n >= line-1; n-- {
		if lead := leading(lines[n-1]); bytes.ContainsRune(lead, '\t') {
			return fmt.Sprintf("line %d is indented with a tab: YAML indents with spaces only, replace the tab with spaces (the parser says: %s)", n, strings.ReplaceAll(parserSays, "\t", `\t`)), n
		}
	}
	if key := colonless(lines[line-1]); key != "" && (strings.Contains(parserSays, "non-map value") || strings.Contains(parserSays, "unexpected key name")) {
		return fmt.Sprintf("line %d has no ':' after %q: a key and its value are written %s: VALUE (the parser says: %s)", line, key, key, parserSays), line
	}
	if strings.Contains(parserSays, "mapping value is not allowed") && line < len(lines) && !opens(lines[line-1]) {
		// The parser names the line above the one indented too deep.
		if next := lines[line]; len(bytes.TrimSpace(next)) > 0 {
			if is, was := indents(next, lines[line-1]); is > was {
				return deeper(line+1, is, was, parserSays), line + 1
			}
		}
	}
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

// opens reports whether a line opens a block below it (it ends with ':'
// or is a bare '-').
func opens(l []byte) bool {
	t := bytes.TrimRight(l, " \r")
	return bytes.HasSuffix(t, []byte(":")) || bytes.HasSuffix(t, []byte("-"))
}

// keyWithoutColon is a line that reads as a key and a value with the colon
// left out: "capability file.read", "- id a".
var keyWithoutColon = regexp.MustCompile(`^\s*(?:-\s+)*([A-Za-z_][A-Za-z0-9_-]*)\s+[^\s#:]\S*\s*$`)

// colonless is the key of a line that left out its colon, or "".
func colonless(l []byte) string {
	if m := keyWithoutColon.FindSubmatch(bytes.TrimRight(l, "\r")); m != nil {
		return string(m[1])
	}
	return ""
}

// unclosedFlow finds the '{' or '[' left open where the parser gave up at
// line, when it gave up for want of a closing bracket: the parser names
// the line after, where the fix is not. Quoted text and comments are
// skipped, and a bracket closed later in the file (a missing ',' between
// entries) is not named; a block scalar's braces could mislead it, so it
// answers only for the parser's "',' or '}'" and "',' or ']'" complaints.
func unclosedFlow(data []byte, line int, parserSays string) (Pos, byte, bool) {
	if !strings.Contains(parserSays, "'}'") && !strings.Contains(parserSays, "']'") {
		return Pos{}, 0, false
	}
	var open []Pos
	var kinds []byte
	var quote byte
	depth, at := 0, Pos{} // the innermost bracket open where the parser gave up
	l, c := 1, 0
	for i := 0; i < len(data); i++ {
		b := data[i]
		c++
		switch {
		case b == '\n':
			l, c = l+1, 0
			if l == line && len(open) > 0 {
				depth, at = len(open), open[len(open)-1]
			}
		case quote == '"' && b == '\\' && i+1 < len(data) && data[i+1] != '\n':
			i, c = i+1, c+1
		case quote != 0 && b == quote:
			quote = 0
		case quote != 0:
		case (b == '"' || b == '\'') && (i == 0 || bytes.IndexByte([]byte(" \t\n[{,"), data[i-1]) >= 0):
			quote = b // a quote opens a scalar only where a scalar starts (not "it's")
		case b == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n'):
			for i+1 < len(data) && data[i+1] != '\n' {
				i++
			}
		case b == '{' || b == '[':
			open, kinds = append(open, Pos{l, c}), append(kinds, b)
		case (b == '}' || b == ']') && len(open) > 0:
			open, kinds = open[:len(open)-1], kinds[:len(kinds)-1]
		}
	}
	if depth == 0 || len(open) < depth || open[depth-1] != at {
		return Pos{}, 0, false // nothing open there, or closed later
	}
	return at, kinds[depth-1], true
}
