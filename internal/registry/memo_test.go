package registry

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// toolNames are the names of r's tools from the project's own folder.
func toolNames(r *Registry) []string {
	var out []string
	for _, m := range r.Tools {
		if m.Source == "project" || m.Kit == "extra" {
			out = append(out, m.Name+"@"+m.Version)
		}
	}
	slices.Sort(out)
	return out
}

// TestMemoWatchSeesEveryChange: once a memo watches, a load answers its
// registry without looking at files, and the load right after any change
// (no wait) finds the change.
func TestMemoWatchSeesEveryChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		noDirs bool // the project has no tools or kits folder yet
		change func(t *testing.T, root string)
		want   []string
	}{
		{"a tool.yaml edited in place", false, func(t *testing.T, root string) {
			f, err := os.OpenFile(filepath.Join(root, "tools/a/tool.yaml"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("priority: 3\n")
			f.Close()
			writeTool(t, filepath.Join(root, "tools"), "a", "2.0.0", "x.y", "") // and its version
		}, []string{"a@2.0.0"}},
		{"a tool added", false, func(t *testing.T, root string) {
			writeTool(t, filepath.Join(root, "tools"), "b", "1.0.0", "x.z", "")
		}, []string{"a@1.0.0", "b@1.0.0"}},
		{"a tool removed", false, func(t *testing.T, root string) {
			os.RemoveAll(filepath.Join(root, "tools/a"))
		}, nil},
		{"a tool folder renamed away", false, func(t *testing.T, root string) {
			os.Rename(filepath.Join(root, "tools/a"), filepath.Join(root, "tools/.a"))
		}, nil},
		{"the tools folder made", true, func(t *testing.T, root string) {
			writeTool(t, filepath.Join(root, "tools"), "c", "1.0.0", "x.c", "")
		}, []string{"c@1.0.0"}},
		{"an active kit made", true, func(t *testing.T, root string) {
			writeTool(t, writeKit(t, root, "extra"), "k", "1.0.0", "x.k", "")
		}, []string{"k@1.0.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if !tc.noDirs {
				writeTool(t, filepath.Join(root, "tools"), "a", "1.0.0", "x.y", "")
			}
			o := opts(root, "extra")
			o.Builtin = nil
			o = watched(t, o)
			before, _ := Load(o)
			if again, _ := Load(o); again != before {
				t.Fatal("an unchanged project's load built a new registry")
			}
			tc.change(t, root)
			r, err := Load(o)
			if err != nil {
				t.Fatal(err)
			}
			if got := toolNames(r); !slices.Equal(got, tc.want) {
				t.Fatalf("after the change the load found %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMemoWatchRepairsBuiltinKitCopy: a built-in kit's copy on disk,
// altered below its tools' folders while the memo watches, is written
// again by the next load, as before there was a watch.
func TestMemoWatchRepairsBuiltinKitCopy(t *testing.T) {
	o := opts(t.TempDir(), "media")
	o.KitCache = t.TempDir()
	o = watched(t, o)
	script, want := mediaScript(t, o)
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho altered\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(o); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(script); string(got) != string(want) {
		t.Fatalf("the altered copy was not written again: %q", got)
	}
}

// mediaScript is a script of the media kit's copy on disk, and what it
// holds.
func mediaScript(t *testing.T, o Options) (string, []byte) {
	t.Helper()
	r, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Tools {
		if m.Kit == "media" && filepath.Base(m.Dir) == "video-convert" {
			script := filepath.Join(m.Dir, "run.py")
			b, err := os.ReadFile(script)
			if err != nil {
				t.Fatalf("the media kit's copy: %v", err)
			}
			return script, b
		}
	}
	t.Fatal("no media kit's copy")
	return "", nil
}

// TestMemoOneLoadDoesNotWatch: a command that loads once (the CLI) takes
// no inotify instance.
func TestMemoOneLoadDoesNotWatch(t *testing.T) {
	root := t.TempDir()
	writeTool(t, filepath.Join(root, "tools"), "a", "1.0.0", "x.y", "")
	o := opts(root)
	o.Memo = &Memo{}
	if _, err := Load(o); err != nil {
		t.Fatal(err)
	}
	if o.Memo.w != nil {
		t.Fatal("one load started a watch")
	}
}
