package activities

import (
	"strings"
	"testing"
)

// Distinct workflow IDs give distinct run folders, none of which leaves
// runs_dir or passes a file name's length.
func TestRunFolderName(t *testing.T) {
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
		got := RunFolderName(c.id)
		if c.want != "" && got != c.want {
			t.Errorf("RunFolderName(%q) = %q, want %q", c.id, got, c.want)
		}
		if len(got) > maxFolderName || strings.ContainsAny(got, "/\x00") || got == "." || got == ".." {
			t.Errorf("RunFolderName(%q) = %q: not a safe folder name", c.id, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q share folder %q", c.id, other, got)
		}
		seen[got] = c.id
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"", true},
		{"/runs/r/steps/a/data.json", true},
		{"/runs/r", true},
		{"/runs/r/../r2/data.json", false},
		{"/runs/r2/data.json", false},
		{"/etc/passwd", false},
		{"steps/a", false},
	} {
		if err := within("/runs/r", c.path); (err == nil) != c.ok {
			t.Errorf("within(/runs/r, %q) = %v, want ok=%v", c.path, err, c.ok)
		}
	}
}

func TestLocalPath(t *testing.T) {
	run := "/srv/b/.capflow/runs/capflow-x-1"
	for _, c := range []struct{ remote, want string }{
		{"/other/host/.capflow/runs/capflow-x-1/steps/make/data.json", run + "/steps/make/data.json"},
		{"/other/host/.capflow/runs/capflow-x-1/steps/each/items/3/data.json", run + "/steps/each/items/3/data.json"},
		{"/elsewhere/data.json", run + "/steps/make/data.json"},
		{"/h/.capflow/runs/capflow-x-1/../../../../etc/passwd", ""},
	} {
		got, ok := localPath(run, "capflow-x-1", c.remote, "make")
		if (c.want == "") == ok || (ok && got != c.want) {
			t.Errorf("%s: %q %v, want %q", c.remote, got, ok, c.want)
		}
	}
}
