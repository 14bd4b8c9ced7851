package yamldoc

import "fmt"

// prescan checks the raw text before the lexer sees it (the lexer's memory
// grows with its tokens, about 280 bytes each): nesting past MaxDepth
// (flow brackets where a value starts, chains of "- " at a line's start)
// and more than MaxTokens places where a token starts.
//
// It reads text, not YAML, and errs towards counting: every bracket,
// comma, "- ", ": ", comment, quote, tag, anchor, alias, "?", block
// scalar header and document marker counts, wherever it starts a token;
// a quote opens a string only where a value starts (after ": ", "- ",
// "[", "{", ",", "?", or at a line's start after a line that ended
// where a value starts), never inside a plain value ("a: x 'y", "it's",
// a plain value's next line), and a string it opened ends with its line.
// A line break is "\n", "\r\n" or "\r", as for the lexer. checkTokens then
// reads the nesting and each mapping's keys as the parser will.
func prescan(data []byte) (Pos, string) {
	s := scan{line: 1, lineStart: true}
	for i := 0; i < len(data); i++ {
		if why := s.step(data, i); why != "" {
			return Pos{s.line, s.col}, why
		}
		i += s.skip
		s.skip = 0
	}
	return Pos{}, ""
}

// scan is prescan's state at a byte of the text.
type scan struct {
	line, col, depth, tokens int
	quote                    byte // the open string's quote, 0 outside one
	comment, lineStart       bool
	dashes                   int  // "- " at this line's start
	last                     byte // the last byte read outside strings on this line, 0 for none
	lastLine                 byte // last, at the end of the last line that had one
	skip                     int  // bytes step read past the one it was given
	text, directive          bool // this line holds more than spaces; is a directive (%)
	tabWork, angleWork       int  // what tabs and runs of '<' cost the lexer so far
	indent                   int  // the indentation of the last line that held a value
	blank, tabs, angles      int  // blank lines in a row; tabs on this line; '<' in a row
}

// Bounds on what go-yaml's lexer reads in time quadratic in it.
const (
	// maxBlankLines bounds blank lines in a row: after a block scalar
	// the lexer trims them from it one at a time, each copying the whole
	// scalar (100,000 after a line of text took 27 s; 50 after 4 MB, 1.7 s).
	maxBlankLines = 20
	// maxTabWork bounds each line's tabs times its length, summed: in a
	// double-quoted string the lexer reads to the line's end at each tab
	// (100,000 tabs on a line: 7 s; 510 lines of 8,185: 10.6 s).
	maxTabWork = 1 << 26
	// maxAngles bounds '<' in a row, and maxAngleWork their runs' squares
	// summed: the lexer counts the rest of a run at each '<', looking for a
	// merge key (100,000 in a row: 3.4 s).
	maxAngles, maxAngleWork = 1000, 1 << 23
)

// endLine checks the line that ends here and starts the next.
func (s *scan) endLine() string {
	if s.tabWork += s.tabs * s.col; s.tabWork > maxTabWork {
		return "too many tabs on long lines (the YAML reader's time grows with each line's tabs times its length): write them as \\t in a double-quoted string, or split the lines"
	}
	if s.blank = s.blank + 1; s.text {
		s.blank = 0
	}
	if s.blank > maxBlankLines {
		return fmt.Sprintf("more than %d blank lines in a row", maxBlankLines)
	}
	if s.last != 0 {
		s.lastLine = s.last
	}
	s.line, s.col, s.quote, s.comment, s.lineStart, s.dashes, s.last, s.text, s.tabs, s.directive = s.line+1, 0, 0, false, true, 0, 0, false, 0, false
	return ""
}

func (s *scan) count() string {
	if s.tokens++; s.tokens > MaxTokens {
		return tooMany
	}
	return ""
}

// valueStart reports whether b, the last byte read on a line, leaves the
// next byte where a value starts: after ": ", "- ", "? ", at a line's
// start, and in a flow collection after "[", "{" or ",".
func (s *scan) valueStart(b byte) bool {
	switch b {
	case 0, ':', '-', '?':
		return true
	case '[', '{', ',':
		return s.depth > 0
	}
	return false
}

// content is a line's first byte that is not a space or a "- ": a line
// that goes on a plain value (the last line ended inside one, and this one
// is indented further or inside brackets) opens nothing.
func (s *scan) content(ch byte) {
	indent := s.col - 1
	if s.last == 0 && !s.valueStart(s.lastLine) && (s.depth > 0 || indent > s.indent) {
		s.last = 'a'
	}
	s.indent, s.directive = indent, ch == '%' && s.col == 1
}

// step reads data[i].
func (s *scan) step(data []byte, i int) string {
	ch := data[i]
	s.col++
	if s.angles++; ch != '<' {
		s.angles = 0
	} else if s.angleWork += s.angles; s.angles > maxAngles || s.angleWork > maxAngleWork {
		return fmt.Sprintf("too many '<' in a row (at most %d, and fewer in all)", maxAngles)
	}
	switch ch {
	case '\t':
		s.tabs++
	case ' ', '\n', '\r':
	default:
		s.text = true
	}
	switch {
	case ch == '\n' || ch == '\r':
		if ch == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			s.skip = 1
		}
		return s.endLine()
	case s.comment:
		return ""
	case s.quote != 0:
		switch {
		case s.quote == '"' && ch == '\\' && i+1 < len(data) && data[i+1] != '\n' && data[i+1] != '\r':
			s.skip, s.col = 1, s.col+1 // an escaped character, never the line's end
		case ch == s.quote:
			s.quote, s.last = 0, ch
		}
		return ""
	case s.lineStart && (ch == ' ' || ch == '\t'):
		return ""
	case s.lineStart && ch == '-' && (i+1 == len(data) || isBreak(data[i+1])):
		if s.dashes++; s.dashes > MaxDepth {
			return fmt.Sprintf("nesting deeper than %d levels", MaxDepth)
		}
		s.last = '-'
		return s.count()
	}
	if s.lineStart && s.dashes == 0 {
		s.content(ch)
	}
	s.lineStart = false
	return s.sign(data, i)
}

// sign reads a byte outside strings and comments.
func (s *scan) sign(data []byte, i int) string {
	ch, before, last := data[i], byte(' '), s.last
	if i > 0 {
		before = data[i-1]
	}
	if ch != ' ' && ch != '\t' {
		s.last = ch
	}
	flow := s.depth > 0 && (before == '[' || before == '{' || before == ',' || before == ':')
	starts := isBreak(before) || flow
	switch ch {
	case '"', '\'':
		if !starts {
			break
		}
		// After ":" in brackets, a string only after a quoted key ({"a":"b"}).
		if s.valueStart(last) && (before != ':' || i >= 2 && (data[i-2] == '"' || data[i-2] == '\'')) {
			s.quote = ch
		}
		return s.count() // a string, or where the lexer may take one to start
	case '#':
		if isBreak(before) {
			s.comment, s.last = true, last // a comment leaves the line as it was
			return s.count()
		}
	case '[', '{':
		if s.depth > 0 || s.valueStart(last) {
			if s.depth++; s.depth > MaxDepth {
				return fmt.Sprintf("nesting deeper than %d levels", MaxDepth)
			}
		}
		return s.count()
	case ']', '}':
		s.depth = max(0, s.depth-1)
		return s.count()
	case ',', '@', '`':
		return s.count()
	case ':', '-', '?':
		if i+1 == len(data) || isBreak(data[i+1]) || ch == ':' && s.depth > 0 {
			return s.count()
		}
	case '!', '&', '*', '|', '>':
		if starts {
			return s.count()
		}
	case ' ', '\t':
	default:
		if s.valueStart(last) || s.directive && isBreak(before) {
			return s.count() // a plain value's start
		}
	}
	if (ch == '-' || ch == '.') && s.col == 1 && i+2 < len(data) && data[i+1] == ch && data[i+2] == ch {
		return s.count() // a document's start or end
	}
	return ""
}

// isBreak is a space, a tab or a line break.
func isBreak(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
