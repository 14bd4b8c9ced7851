package caperr

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Error is capflow's typed error: a contract code, a message, and where
// the problem is (file, line, column, field path) when there is a where.
type Error struct {
	Code    Code
	Message string
	File    string
	Line    int
	Column  int
	Field   string
	Err     error
}

// New returns an Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error that wraps err; its message is prefixed to err's.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// At sets the position and returns e, for chaining.
func (e *Error) At(file string, line, col int, field string) *Error {
	e.File, e.Line, e.Column, e.Field = file, line, col, field
	return e
}

// Location renders "file:line:col" with whatever parts are known.
func (e *Error) Location() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	return b.String()
}

func (e *Error) Error() string {
	var parts []string
	if loc := e.Location(); loc != "" {
		parts = append(parts, loc)
	}
	if e.Field != "" {
		parts = append(parts, e.Field)
	}
	msg := e.Message
	if e.Err != nil {
		if msg == "" {
			msg = e.Err.Error()
		} else {
			msg += ": " + e.Err.Error()
		}
	}
	parts = append(parts, msg)
	return strings.Join(parts, ": ")
}

func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code carried by err (or anything it wraps), and
// INTERNAL_ERROR for errors that carry none.
func CodeOf(err error) Code {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return InternalError
}

// Problems is every problem found in one or more files.
type Problems []*Error

func (p Problems) Error() string {
	var b strings.Builder
	for i, e := range p {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Sort orders problems by file, line, column.
func (p Problems) Sort() {
	sort.SliceStable(p, func(i, j int) bool {
		a, b := p[i], p[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// WithCode returns err with its code replaced (a YAML error in a config
// file is a CONFIG_ERROR, not bad input), keeping its position.
func WithCode(err error, code Code) error {
	var ce *Error
	if errors.As(err, &ce) {
		c := *ce
		c.Code = code
		return &c
	}
	return Wrap(code, err, "")
}

// As returns err as an *Error, wrapping it with code when it is not one.
func As(err error, code Code) *Error {
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	return Wrap(code, err, "")
}

// FirstLine is a message's first line (a headline: the rest is detail).
func FirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// InputsRefused starts the message of a step whose tool's input_schema
// refused its inputs ("inputs for TOOL: with.n: ..."): what-next tells it
// from its output's by this.
const InputsRefused = "inputs for "

// Headline is a message's first line cut to at most max bytes, "…"
// marking a cut: what a one-line view (a step's message, a table cell)
// shows of a long message.
func Headline(s string, max int) string {
	s = FirstLine(s)
	if len(s) <= max {
		return s
	}
	return Prefix(s, max) + "…"
}

// Prefix is s's longest start of at most n bytes that ends on a
// character: a cut through one is invalid UTF-8, which JSON does not
// carry as it is.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)]
}

// Count is n and a noun, plural unless n is 1 ("1 step", "3 steps").
func Count(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "y") && !strings.ContainsAny(noun[len(noun)-2:len(noun)-1], "aeiou"):
		return fmt.Sprintf("%d %sies", n, noun[:len(noun)-1])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
