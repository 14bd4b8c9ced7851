package runfolder

import (
	"strings"
	"testing"
)

// Distinct workflow IDs give distinct run folders, none of which leaves
// runs_dir or passes a file name's length.
func TestName(t *testing.T) {
	long := strings.Repeat("x", 300)
	seen := map[string]string{}
	for _, c := range []struct{ id, want string }{
		{"team/a", "team_2fa"},
		{"team_a", "team_5fa"},
		{"team-a.1", "team-a.1"},
		{"..", "_2e."},
		{".", "_2e"},
		{"", "_"},
		{"a b/../c", "a_20b_2f.._2fc"},
		{"Ünï", "_c3_9cn_c3_af"},
		{long, ""},
		{long + "y", ""},
	} {
		got := Name(c.id)
		if c.want != "" && got != c.want {
			t.Errorf("Name(%q) = %q, want %q", c.id, got, c.want)
		}
		if len(got) > maxName || strings.ContainsAny(got, "/\x00") || got == "." || got == ".." {
			t.Errorf("Name(%q) = %q: not a safe folder name", c.id, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q share folder %q", c.id, other, got)
		}
		seen[got] = c.id
	}
}
