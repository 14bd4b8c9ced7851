package runfolder

import (
	"os"
	"path/filepath"
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

// Make makes a run folder where runs_dir exists or not, and refuses a file
// in its place.
func TestMake(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir string
		ok        bool
	}{
		{"runs_dir exists", "run-a", true},
		{"the folder exists", "run-a", true},
		{"runs_dir does not exist yet", "runs/run-b", true},
		{"a file is there", "file", false},
		{"beneath a file", "file/run-c", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(root, c.dir)
			err := Make(dir)
			if (err == nil) != c.ok {
				t.Fatalf("Make(%s) = %v, want ok %v", c.dir, err, c.ok)
			}
			if st, serr := os.Stat(dir); c.ok && (serr != nil || !st.IsDir()) {
				t.Fatalf("%s is not a folder after Make: %v", c.dir, serr)
			}
		})
	}
}
