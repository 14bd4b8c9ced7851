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
