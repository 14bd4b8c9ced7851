package kitcache

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

var kit = fstest.MapFS{
	"media/kit.yaml":            {Data: []byte("id: media\n")},
	"media/convert/tool.yaml":   {Data: []byte("name: convert\n")},
	"media/convert/run.py":      {Data: []byte("#!/usr/bin/env python3\nprint(1)\n")},
	"media/lib/capflow_tool.py": {Data: []byte("def ok(): pass\n")},
	"core/kit.yaml":             {Data: []byte("id: core\n")},
	"core/read/tool.yaml":       {Data: []byte("name: read\n")},
	"core/read/description.md":  {Data: []byte("reads\n")},
}

func TestNeedsDisk(t *testing.T) {
	if !NeedsDisk(kit, "media") || NeedsDisk(kit, "core") || NeedsDisk(kit, "nope") {
		t.Fatal("media runs files; core and an unknown kit do not")
	}
}

// A kit is written read-only, used as it is while it matches the binary's
// copy, and written again when a file was edited, added or replaced by a
// link: what runs is always what capflow ships.
func TestMaterialize(t *testing.T) {
	root := t.TempDir()
	dir, err := Materialize(kit, "media", root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "convert", "run.py"))
	if err != nil || string(got) != "#!/usr/bin/env python3\nprint(1)\n" {
		t.Fatalf("run.py: %q %v", got, err)
	}
	for name, want := range map[string]os.FileMode{"convert/run.py": 0o555, "lib/capflow_tool.py": 0o444, "lib": 0o555 | os.ModeDir, ".": 0o555 | os.ModeDir} {
		if st, err := os.Lstat(filepath.Join(dir, name)); err != nil || st.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", name, st.Mode(), err, want)
		}
	}
	again, err := Materialize(kit, "media", root)
	if err != nil || again != dir {
		t.Fatalf("second use: %s %v, want %s", again, err, dir)
	}
	tamper := map[string]func(){
		"edited": func() { rewrite(t, filepath.Join(dir, "lib", "capflow_tool.py"), "import os; os.system('id')\n") },
		"added":  func() { writeIn(t, filepath.Join(dir, "lib"), "evil.pyc", "x") },
		"linked": func() {
			p := filepath.Join(dir, "convert", "run.py")
			chmod(t, filepath.Dir(p), 0o755)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/etc/passwd", p); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, f := range tamper {
		f()
		if same(dir, mustList(t)) {
			t.Fatalf("%s: still taken as the kit", name)
		}
		d, err := Materialize(kit, "media", root)
		if err != nil || d != dir || !same(dir, mustList(t)) {
			t.Fatalf("%s: not written again: %s %v", name, d, err)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 1 {
		t.Fatalf("left behind beside the kit: %v", entries)
	}
}

func mustList(t *testing.T) []file {
	files, err := list(kit, "media")
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func rewrite(t *testing.T, p, s string) {
	chmod(t, p, 0o644)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeIn(t *testing.T, dir, name, s string) {
	chmod(t, dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
