package toolrun

import (
	"testing"
	"unicode/utf8"
)

// TestFirstLineCutsOnACharacter: an MCP server's long non-ASCII answer is
// cut on a character's boundary (a cut through one made a cache entry
// whose JSON did not read back byte for byte).
func TestFirstLineCutsOnACharacter(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"ответ", 3, "о…"}, {"ответ", 4, "от…"}, {"abc\ndef", 10, "abc"}, {"abcdef", 3, "abc…"}, {"短い", 10, "短い"},
	} {
		got := firstLine(c.in, c.max)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("firstLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
