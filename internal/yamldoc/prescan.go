package yamldoc

import "fmt"

// prescan checks the raw text before the lexer and parser see it (their
// memory grows with the tokens, about 280 bytes each in the lexer alone):
// nesting past MaxDepth (flow brackets outside quotes and comments,
// chains of "- " that open a sequence per dash) and more than MaxTokens
// separators, brackets and comments.
//
// It reads text, not YAML, so it errs towards counting: a quote opens a
// string only where a value starts (after ": ", "- ", "[", "{", ",", "?"
// or at a line's start), never inside a plain one ("a: x 'y" or "it's"),
// and a string it took to open ends with its line. A quote it misread
// hides at most the rest of that line from it; checkTokens then reads
// the nesting and each mapping's keys as the parser will.
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
	skip                     int  // bytes step read past the one it was given
}

func (s *scan) count() string {
	if s.tokens++; s.tokens > MaxTokens {
		return tooMany
	}
	return ""
}

// step reads data[i].
func (s *scan) step(data []byte, i int) string {
	ch := data[i]
	s.col++
	switch {
	case ch == '\n':
		s.line, s.col, s.quote, s.comment, s.lineStart, s.dashes, s.last = s.line+1, 0, 0, false, true, 0, 0
		return ""
	case s.comment:
		return ""
	case s.quote != 0:
		switch {
		case s.quote == '"' && ch == '\\' && i+1 < len(data) && data[i+1] != '\n':
			s.skip, s.col = 1, s.col+1 // an escaped character, never the line's end
		case ch == s.quote:
			s.quote, s.last = 0, ch
		}
		return ""
	case s.lineStart && (ch == ' ' || ch == '\t'):
		return ""
	case s.lineStart && ch == '-' && (i+1 == len(data) || data[i+1] == ' ' || data[i+1] == '\n'):
		if s.dashes++; s.dashes > MaxDepth {
			return fmt.Sprintf("nesting deeper than %d levels", MaxDepth)
		}
		s.last = '-'
		return s.count()
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
	if ch != ' ' && ch != '\t' && ch != '\r' {
		s.last = ch
	}
	switch ch {
	case '"', '\'':
		if isSpace(before) || before == '[' || before == '{' || before == ',' || before == ':' {
			switch last {
			case 0, ':', '-', '[', '{', ',', '?':
				s.quote = ch
			}
		}
	case '#':
		if isSpace(before) {
			s.comment = true
			return s.count()
		}
	case '[', '{':
		if s.depth++; s.depth > MaxDepth {
			return fmt.Sprintf("nesting deeper than %d levels", MaxDepth)
		}
		return s.count()
	case ']', '}':
		s.depth = max(0, s.depth-1)
		return s.count()
	case ',':
		return s.count()
	case ':':
		if i+1 == len(data) || isSpace(data[i+1]) || data[i+1] == '\r' {
			return s.count()
		}
	}
	return ""
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' }
