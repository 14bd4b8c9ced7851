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
}

func (s *scan) count() string {
	if s.tokens++; s.tokens > MaxTokens {
		return tooMany
	}
	return ""
}

// valueStart reports whether b, the last byte read on a line, leaves the
// next byte where a value starts.
func valueStart(b byte) bool {
	switch b {
	case 0, ':', '-', '[', '{', ',', '?':
		return true
	}
	return false
}

// step reads data[i].
func (s *scan) step(data []byte, i int) string {
	ch := data[i]
	s.col++
	switch {
	case ch == '\n' || ch == '\r':
		if ch == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			s.skip = 1
		}
		if s.last != 0 {
			s.lastLine = s.last
		}
		s.line, s.col, s.quote, s.comment, s.lineStart, s.dashes, s.last = s.line+1, 0, 0, false, true, 0, 0
		return ""
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
	if s.lineStart && s.last == 0 && !valueStart(s.lastLine) {
		s.last = 'a' // the line goes on a plain value: nothing in it opens a string
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
	starts := isBreak(before) || before == '[' || before == '{' || before == ','
	switch ch {
	case '"', '\'':
		if !starts && before != ':' {
			break
		}
		if valueStart(last) {
			s.quote = ch
		}
		return s.count() // a string, or where the lexer may take one to start
	case '#':
		if isBreak(before) {
			s.comment, s.last = true, last // a comment leaves the line as it was
			return s.count()
		}
	case '[', '{':
		if s.depth > 0 || valueStart(last) {
			if s.depth++; s.depth > MaxDepth {
				return fmt.Sprintf("nesting deeper than %d levels", MaxDepth)
			}
		}
		return s.count()
	case ']', '}':
		s.depth = max(0, s.depth-1)
		return s.count()
	case ',':
		return s.count()
	case ':', '-', '?':
		if i+1 == len(data) || isBreak(data[i+1]) {
			return s.count()
		}
	case '!', '&', '*', '|', '>':
		if starts {
			return s.count()
		}
	}
	if (ch == '-' || ch == '.') && s.col == 1 && i+2 < len(data) && data[i+1] == ch && data[i+2] == ch {
		return s.count() // a document's start or end
	}
	return ""
}

// isBreak is a space, a tab or a line break.
func isBreak(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
