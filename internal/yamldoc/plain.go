package yamldoc

import (
	"bytes"
	"fmt"
	"strings"
)

// plainWords says a YAML syntax error the way a person fixes it: a tab in
// the indentation, a line indented unlike its neighbours; the parser's own
// words follow in parentheses. "" when neither explains it.
func plainWords(data []byte, line int, parserSays string) string {
	lines := bytes.Split(data, []byte("\n"))
	if line < 1 || line > len(lines) {
		return ""
	}
	for n := line; n >= 1 && n >= line-1; n-- {
		if lead := leading(lines[n-1]); bytes.ContainsRune(lead, '\t') {
			return fmt.Sprintf("line %d is indented with a tab: YAML indents with spaces only, replace the tab with spaces (the parser says: %s)", n, strings.ReplaceAll(parserSays, "\t", `\t`))
		}
	}
	this := len(leading(lines[line-1]))
	for n := line - 1; n >= 1; n-- {
		prev := lines[n-1]
		if t := bytes.TrimSpace(prev); len(t) == 0 || t[0] == '#' {
			continue
		}
		was := len(leading(prev))
		opens := bytes.HasSuffix(bytes.TrimRight(prev, " \r"), []byte(":")) || bytes.HasSuffix(bytes.TrimRight(prev, " \r"), []byte("-"))
		if this > was && !opens {
			return fmt.Sprintf("line %d is indented %d spaces, the line above %d: a line of the same list or mapping is indented as its siblings are (the parser says: %s)", line, this, was, parserSays)
		}
		return ""
	}
	return ""
}

// leading is a line's indentation: its leading spaces and tabs.
func leading(l []byte) []byte {
	return l[:len(l)-len(bytes.TrimLeft(l, " \t"))]
}

// unclosedFlow finds the '{' or '[' still open where the parser gave up
// at line, when it gave up for want of its closing bracket: the parser
// names the line after, where the fix is not. Quoted text and comments
// are skipped; a block scalar's braces could mislead it, so it answers
// only for the parser's "',' or '}'" and "',' or ']'" complaints.
func unclosedFlow(data []byte, line int, parserSays string) (Pos, byte, bool) {
	if !strings.Contains(parserSays, "'}'") && !strings.Contains(parserSays, "']'") {
		return Pos{}, 0, false
	}
	var open []Pos
	var kinds []byte
	var quote byte
	l, c := 1, 0
	for i := 0; i < len(data) && l < line; i++ {
		b := data[i]
		c++
		switch {
		case b == '\n':
			l, c = l+1, 0
			if quote == 0 {
				continue
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
	if len(open) == 0 || open[len(open)-1].Line >= line {
		return Pos{}, 0, false
	}
	return open[len(open)-1], kinds[len(kinds)-1], true
}
