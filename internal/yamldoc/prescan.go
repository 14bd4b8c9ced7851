package yamldoc

import "fmt"

// prescan checks the raw text before the parser sees it (the parser's
// recursion and memory are unbounded): nesting past MaxDepth (flow
// brackets outside quotes and comments, chains of "- " that open a
// sequence per dash) and more than MaxTokens separators.
func prescan(data []byte) (Pos, string) {
	line, col, depth, tokens := 1, 0, 0, 0
	count := func() bool { tokens++; return tokens > MaxTokens }
	var quote byte
	comment, lineStart, dashes := false, true, 0
	for i := 0; i < len(data); i++ {
		ch := data[i]
		col++
		if ch == '\n' {
			line, col, comment, lineStart, dashes = line+1, 0, false, true, 0
			continue
		}
		if comment {
			continue
		}
		if quote != 0 {
			switch {
			case quote == '"' && ch == '\\':
				i++
				col++
			case ch == quote:
				quote = 0
			}
			continue
		}
		if lineStart {
			switch {
			case ch == ' ' || ch == '\t':
				continue
			case ch == '-' && i+1 < len(data) && (data[i+1] == ' ' || data[i+1] == '\n'):
				dashes++
				if dashes > MaxDepth {
					return Pos{line, col}, fmt.Sprintf("nesting deeper than %d levels", MaxDepth)
				}
				if count() {
					return Pos{line, col}, tooMany
				}
				continue
			}
			lineStart = false
		}
		switch ch {
		case '"', '\'':
			if i == 0 || data[i-1] == ' ' || data[i-1] == '[' || data[i-1] == '{' || data[i-1] == ',' || data[i-1] == ':' || data[i-1] == '\t' {
				quote = ch
			}
		case '#':
			if i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n' {
				comment = true
			}
		case '[', '{':
			depth++
			if depth > MaxDepth {
				return Pos{line, col}, fmt.Sprintf("nesting deeper than %d levels", MaxDepth)
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case ',':
			if count() {
				return Pos{line, col}, tooMany
			}
		case ':':
			if i+1 == len(data) || data[i+1] == ' ' || data[i+1] == '\n' || data[i+1] == '\r' || data[i+1] == '\t' {
				if count() {
					return Pos{line, col}, tooMany
				}
			}
		}
	}
	return Pos{}, ""
}

func sizeText(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
