package cli

import (
	"fmt"
	"github.com/capflow/capflow/internal/caperr"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/capflow/capflow/internal/wfapi"
)

// Output where a person reads it: colour on a terminal (never with
// NO_COLOR set or TERM=dumb; FORCE_COLOR forces it), and while a run goes,
// one progress line redrawn in place on a terminal's stderr instead of a
// line per step (docs/cli.md). Anything else (a pipe, a file, CI) gets
// plain text, a line per event.

// screen is one output stream as capflow writes to it.
type screen struct {
	color bool // colour escape codes
	live  bool // a terminal: a line may be redrawn in place
	width int  // its columns (80 when unknown)
}

// screenOf says how to write to w.
func screenOf(w io.Writer) screen {
	s := screen{width: 80}
	f, ok := w.(*os.File)
	if ok && term.IsTerminal(int(f.Fd())) {
		s.live = true
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 {
			s.width = cols
		}
	}
	s.color = colorWanted(s.live, os.Getenv)
	return s
}

// colorWanted decides colour from a terminal and the environment
// (no-color.org; FORCE_COLOR as Node's and many tools').
func colorWanted(tty bool, env func(string) string) bool {
	switch {
	case env("NO_COLOR") != "":
		return false
	case env("FORCE_COLOR") != "" && env("FORCE_COLOR") != "0":
		return true
	}
	return tty && env("TERM") != "dumb"
}

// SGR colours.
const (
	red    = "31"
	green  = "32"
	yellow = "33"
	cyan   = "36"
	dim    = "2"
	bold   = "1"
)

// paint wraps s in a colour when the screen has colour.
func (s screen) paint(code, text string) string {
	if !s.color || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

// stepColors colour a step's mark by its state.
var stepColors = map[wfapi.StepState]string{
	wfapi.StepSucceeded: green, wfapi.StepFailed: red, wfapi.StepWaiting: yellow, wfapi.StepRunning: cyan,
	wfapi.StepSkipped: dim, wfapi.StepCancelled: yellow, wfapi.StepBlocked: red,
}

// runColors colour a run's verdict.
var runColors = map[wfapi.RunStatus]string{
	wfapi.StatusPassed: green, wfapi.StatusFailed: red, wfapi.StatusCancelled: yellow, wfapi.StatusPaused: yellow,
	wfapi.StatusBlockedByPolicy: red, wfapi.StatusPartialComplete: red, wfapi.StatusInvalid: red,
}

// statusLine is the progress line redrawn in place on a terminal: with
// an escape code that erases the line, or without colour (NO_COLOR: no
// escape code at all), over spaces.
type statusLine struct {
	s     screen
	w     io.Writer
	shown int // the runes shown (0: none)
}

// show redraws the line (cut to the screen's width).
func (l *statusLine) show(text string) {
	if !l.s.live {
		return
	}
	if utf8.RuneCountInString(text) > l.s.width-1 {
		r := []rune(text)
		text = string(r[:l.s.width-2]) + "…"
	}
	l.clear()
	fmt.Fprint(l.w, l.s.paint(dim, text))
	l.shown = max(utf8.RuneCountInString(text), 1)
}

// clear removes the line, so a permanent line can be printed.
func (l *statusLine) clear() {
	switch {
	case l.shown == 0:
	case l.s.color:
		fmt.Fprint(l.w, "\r\x1b[2K")
	default:
		fmt.Fprint(l.w, "\r"+strings.Repeat(" ", l.shown)+"\r")
	}
	l.shown = 0
}

// progressText is a run's progress in one line: done of all, and what
// runs now.
func progressText(p *wfapi.Result, running []string) string {
	counts := map[wfapi.StepState]int{}
	for _, s := range p.Steps {
		counts[s.Status]++
	}
	total := len(p.Steps)
	if p.StepsOmitted > 0 {
		counts, total = p.StepCounts, 0
		for _, n := range p.StepCounts {
			total += n
		}
	}
	done := counts[wfapi.StepSucceeded] + counts[wfapi.StepFailed] + counts[wfapi.StepSkipped] + counts[wfapi.StepCancelled] + counts[wfapi.StepBlocked]
	text := fmt.Sprintf("… %d/%d steps done", done, total)
	if n := counts[wfapi.StepRunning]; n > 0 {
		text += fmt.Sprintf(" · %d running", n)
		if len(running) > 0 {
			text += ": " + strings.Join(running, ", ")
		}
	}
	if n := counts[wfapi.StepWaiting]; n > 0 {
		text += fmt.Sprintf(" · %d waiting", n)
	}
	return text
}

// printable is text from outside (a tool's message, stderr, a case file)
// as a terminal should show it: control characters quoted (\x1b]0;...
// would set the window's title, \x1b[2J clear the screen).
func printable(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// briefMax bounds a message on a line of human output.
const briefMax = 200

// brief is a message as a line of human output shows it: its first line,
// at most briefMax bytes, and where it was cut, its closing note in
// parentheses kept ("... (not retried: ...)"); report.md and --output json
// have it whole. A tool's 4 KiB message, repeated on the live line, in the
// table and in the verdict, flooded a terminal (a new-user trial).
func brief(s string) string {
	s = caperr.FirstLine(s)
	if len(s) <= briefMax {
		return s
	}
	note := ""
	if i := closingNote(s); i > 0 && len(s)-i <= briefMax/2 {
		note, s = s[i:], s[:i]
	}
	return caperr.Prefix(s, briefMax-len(note)) + "…" + note
}

// closingNote is where the parenthesis that closes s opens (" (" before
// it), nested ones inside it counted: "a (not retried: b (c))" keeps
// "(not retried: b (c))", not "(c))". 0 where s ends otherwise.
func closingNote(s string) int {
	if !strings.HasSuffix(s, ")") {
		return 0
	}
	depth := 0
	for i := len(s) - 1; i > 0; i-- {
		switch s[i] {
		case ')':
			depth++
		case '(':
			if depth--; depth == 0 {
				if s[i-1] == ' ' {
					return i - 1
				}
				return 0
			}
		}
	}
	return 0
}

// printableText is printable for text of several lines: its newlines
// and tabs stay.
func printableText(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unsafeRune(r) && r != '\n' && r != '\t' }) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		parts := strings.Split(l, "\t")
		for j, p := range parts {
			parts[j] = printable(p)
		}
		lines[i] = strings.Join(parts, "\t")
	}
	return strings.Join(lines, "\n")
}

// unsafeRune is a control character, or one that reorders the text
// around it (a path shown reversed to the person who approves it).
func unsafeRune(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }
