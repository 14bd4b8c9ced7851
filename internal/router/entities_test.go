package router

import (
	"regexp"
	"testing"
)

// Two boundaries around a filler share one separator, as \b's do: "list
// files" matched no rule `\blist\b.*\bfiles\b` while each boundary took a
// character of its own.
func TestBoundariesShareASeparator(t *testing.T) {
	cases := []struct {
		pattern, text string
		match         bool
	}{
		{`\b(list|show|ls)\b.*\bfiles?\b`, "list files in plans/", true},
		{`\b(list|show|ls)\b.*\bfiles?\b`, "show me the files", true},
		{`\b(list|show|ls)\b.*\bfiles?\b`, "ls file", true},
		{`\b(list|show|ls)\b.*\bfiles?\b`, "playlist files", false},
		{`\b(list|show|ls)\b.*\bfiles?\b`, "list filesystems", false},
		{`\b(list|show|ls)\b.*\bfiles?\b`, "listfiles", false},
		{`\bпокажи\b.+\bфайлы\b`, "покажи все файлы", true},
		{`\bпокажи\b.+\bфайлы\b`, "покажи файлы", true},
		{`\bпокажи\b.+\bфайлы\b`, "покажифайлы", false},
		{`\b(get)\b.*?\b(url)\b`, "get the url", true},
	}
	for _, c := range cases {
		re := regexp.MustCompile(UnicodeBoundaries(c.pattern))
		if got := re.MatchString(c.text); got != c.match {
			t.Errorf("%s on %q: %v, want %v (as %s)", c.pattern, c.text, got, c.match, re)
		}
	}
}
