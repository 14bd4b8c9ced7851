package registry

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// The ways a change could escape a memo's watch (found by a review of
// it): after each, the memo's next load must find what a load with no
// memo finds.

func bare(root string) Options {
	o := opts(root)
	o.Builtin, o.StateDir = nil, "" // no cache file: only the memo answers
	return o
}

// watched arms a memo for o (three loads) and requires the watch.
func watched(t *testing.T, o Options) Options {
	t.Helper()
	o.Memo = &Memo{}
	for range 3 {
		if _, err := Load(o); err != nil {
			t.Fatal(err)
		}
	}
	if o.Memo.w == nil {
		t.Fatal("the memo does not watch")
	}
	return o
}

// sameAsFresh fails when o's memo answers other tools than a fresh load.
func sameAsFresh(t *testing.T, o Options) {
	t.Helper()
	r, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	f := o
	f.Memo = nil
	fr, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toolNames(r), toolNames(fr); !slices.Equal(got, want) || len(r.Problems) != len(fr.Problems) {
		t.Fatalf("the memo's load found %v (%d problems), a fresh load %v (%d)", got, len(r.Problems), want, len(fr.Problems))
	}
}

func TestMemoWatchPathsAndLinks(t *testing.T) {
	edit := func(t *testing.T, file, from, to string) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(file, bytes.Replace(b, []byte(from), []byte(to), 1), 0o644)
	}
	for _, tc := range []struct {
		name    string
		root    func(base string) string // the project root beneath base
		setup   func(t *testing.T, base, root string)
		change  func(t *testing.T, base, root string)
		watches bool // the memo watches before the change (else it looks every time)
	}{
		{"the tools folder is a link, pointed elsewhere", nil, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "tools-v1"), "a", "1.0.0", "x.y", "")
			writeTool(t, filepath.Join(root, "tools-v2"), "a", "2.0.0", "x.y", "")
			os.Symlink("tools-v1", filepath.Join(root, "tools"))
			os.Mkdir(filepath.Join(root, "kits"), 0o755)
		}, func(t *testing.T, _, root string) {
			os.Symlink("tools-v2", filepath.Join(root, "tools.tmp"))
			os.Rename(filepath.Join(root, "tools.tmp"), filepath.Join(root, "tools"))
		}, true},
		{"the project root is a link to a release, switched", func(base string) string { return filepath.Join(base, "current") }, func(t *testing.T, base, _ string) {
			writeTool(t, filepath.Join(base, "releases/r1/tools"), "a", "1.0.0", "x.y", "")
			writeTool(t, filepath.Join(base, "releases/r2/tools"), "a", "2.0.0", "x.y", "")
			os.Symlink("releases/r1", filepath.Join(base, "current"))
		}, func(t *testing.T, base, _ string) {
			os.Symlink("releases/r2", filepath.Join(base, "current.tmp"))
			os.Rename(filepath.Join(base, "current.tmp"), filepath.Join(base, "current"))
		}, true},
		{"the project folder replaced by another", func(base string) string { return filepath.Join(base, "proj") }, func(t *testing.T, base, root string) {
			writeTool(t, filepath.Join(root, "tools"), "a", "1.0.0", "x.y", "")
			writeTool(t, filepath.Join(base, "proj.new/tools"), "a", "2.0.0", "x.y", "")
			os.Mkdir(filepath.Join(root, "kits"), 0o755)
		}, func(t *testing.T, base, root string) {
			os.Rename(root, filepath.Join(base, "proj.old"))
			os.Rename(filepath.Join(base, "proj.new"), root)
		}, true},
		{"tool.yaml links to a file beneath its folder, edited", nil, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "src"), "a", "1.0.0", "x.y", "")
			dir := filepath.Join(root, "tools/a")
			os.MkdirAll(filepath.Join(dir, "spec"), 0o755)
			b, _ := os.ReadFile(filepath.Join(root, "src/a/tool.yaml"))
			os.WriteFile(filepath.Join(dir, "spec/tool.yaml"), b, 0o644)
			os.Symlink("spec/tool.yaml", filepath.Join(dir, "tool.yaml"))
		}, func(t *testing.T, _, root string) {
			edit(t, filepath.Join(root, "tools/a/spec/tool.yaml"), "1.0.0", "2.0.0")
		}, false},
		{"tool.yaml has another name, written there", nil, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "shared"), "a", "1.0.0", "x.y", "")
			os.MkdirAll(filepath.Join(root, "tools/a"), 0o755)
			os.Link(filepath.Join(root, "shared/a/tool.yaml"), filepath.Join(root, "tools/a/tool.yaml"))
		}, func(t *testing.T, _, root string) {
			edit(t, filepath.Join(root, "shared/a/tool.yaml"), "1.0.0", "2.0.0")
		}, false},
		{"a copy keeping size and modification time (cp -p)", nil, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "tools"), "a", "1.0.0", "x.y", "")
			os.Mkdir(filepath.Join(root, "kits"), 0o755)
		}, func(t *testing.T, _, root string) {
			p := filepath.Join(root, "tools/a/tool.yaml")
			st, _ := os.Stat(p)
			edit(t, p, "1.0.0", "2.0.0")
			os.Chtimes(p, st.ModTime(), st.ModTime())
		}, true},
		{"kit.yaml made in an earlier kits folder", nil, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "k2/extra"), "k", "1.0.0", "x.k", "")
			os.WriteFile(filepath.Join(root, "k2/extra/kit.yaml"), []byte("id: extra\nversion: 1.0.0\ndescription: e\n"), 0o644)
			os.MkdirAll(filepath.Join(root, "k1/extra"), 0o755)
			os.MkdirAll(filepath.Join(root, "tools"), 0o755)
		}, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "k1/extra"), "k", "2.0.0", "x.k", "")
			os.WriteFile(filepath.Join(root, "k1/extra/kit.yaml"), []byte("id: extra\nversion: 1.0.0\ndescription: e\n"), 0o644)
		}, true},
		{"tool.yaml replaced by a rename (an editor's save)", nil, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "tools"), "a", "1.0.0", "x.y", "")
		}, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "stage"), "a", "2.0.0", "x.y", "")
			os.Rename(filepath.Join(root, "stage/a/tool.yaml"), filepath.Join(root, "tools/a/tool.yaml"))
		}, true},
		{"a tool.yaml made in a tool folder that had none", nil, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "tools"), "a", "1.0.0", "x.y", "")
			os.MkdirAll(filepath.Join(root, "tools/b"), 0o755)
		}, func(t *testing.T, _, root string) {
			writeTool(t, filepath.Join(root, "tools"), "b", "1.0.0", "x.b", "")
		}, true},
		{"a kit's folder is a link to a release, switched", nil, func(t *testing.T, _, root string) {
			for _, v := range []string{"1.0.0", "2.0.0"} {
				dir := filepath.Join(root, "releases", v)
				writeTool(t, dir, "k", v, "x.k", "")
				os.WriteFile(filepath.Join(dir, "kit.yaml"), []byte("id: extra\nversion: 1.0.0\ndescription: e\n"), 0o644)
			}
			os.MkdirAll(filepath.Join(root, "k1"), 0o755)
			os.MkdirAll(filepath.Join(root, "tools"), 0o755)
			os.Symlink("1.0.0", filepath.Join(root, "releases/current"))
			os.Symlink("../releases/current", filepath.Join(root, "k1/extra"))
		}, func(t *testing.T, _, root string) {
			// Outside every watched folder: only the kit's path says it.
			os.Symlink("2.0.0", filepath.Join(root, "releases/current.tmp"))
			os.Rename(filepath.Join(root, "releases/current.tmp"), filepath.Join(root, "releases/current"))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			root := base
			if tc.root != nil {
				root = tc.root(base)
			}
			tc.setup(t, base, root)
			o := bare(root)
			o.KitsDirs, o.ActiveKits = []string{"k1", "k2"}, []string{"extra"}
			o.Memo = &Memo{}
			for range 3 {
				Load(o)
			}
			if watching := o.Memo.w != nil; watching != tc.watches {
				t.Fatalf("the memo watches: %v, want %v", watching, tc.watches)
			}
			tc.change(t, base, root)
			sameAsFresh(t, o)
		})
	}
}

// TestMemoWatchKitCopyReplacedAbove: a built-in kit's copy whose digest
// folder is swapped for an altered one is written again.
func TestMemoWatchKitCopyReplacedAbove(t *testing.T) {
	o := opts(t.TempDir(), "media")
	o.KitCache = t.TempDir()
	o = watched(t, o)
	script, want := mediaScript(t, o)
	digestDir := filepath.Dir(filepath.Dir(filepath.Dir(script)))
	rel, _ := filepath.Rel(digestDir, script)
	evil := filepath.Join(o.KitCache, "evil")
	if err := os.CopyFS(evil, os.DirFS(digestDir)); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(filepath.Join(evil, rel)), 0o755)
	os.Remove(filepath.Join(evil, rel))
	os.WriteFile(filepath.Join(evil, rel), []byte("#!/bin/sh\necho altered\n"), 0o755)
	os.Rename(digestDir, digestDir+".old")
	os.Rename(evil, digestDir)
	if _, err := Load(o); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(script); !bytes.Equal(got, want) {
		t.Fatalf("the altered copy was not written again: %q", got)
	}
}

// TestMemoUnwritableKitCopyRetried: a built-in kit that could not be put
// on disk is not watched: once its place is writable, the next load has it.
func TestMemoUnwritableKitCopyRetried(t *testing.T) {
	root, cache := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(cache, "capflow"), []byte("not a folder"), 0o644)
	o := opts(root, "media")
	o.StateDir, o.KitCache, o.Memo = "", filepath.Join(cache, "capflow/kits"), &Memo{}
	for range 3 {
		Load(o)
	}
	os.Remove(filepath.Join(cache, "capflow"))
	sameAsFresh(t, o)
}

// TestMemoLatePut: a load that discovered before a change and stores its
// registry after another load armed the watch ends the watch.
func TestMemoLatePut(t *testing.T) {
	root := t.TempDir()
	writeTool(t, filepath.Join(root, "tools"), "a", "1.0.0", "x.y", "")
	o := bare(root)
	o.Order = []string{ProjectTools, ActiveKits}
	o.Memo = &Memo{}
	files, _ := discover(o) // the slow load, up to its put
	fp, old := fingerprint(o, files), build(o, files)
	old.index(o)
	writeTool(t, filepath.Join(root, "tools"), "a", "2.0.0", "x.y", "")
	for range 3 {
		Load(o)
	}
	o.Memo.put(fp, old)
	sameAsFresh(t, o)
}

// TestMemoConcurrentLoads: with loads running all the while, a load
// begun after a write returned finds it.
func TestMemoConcurrentLoads(t *testing.T) {
	root := t.TempDir()
	writeTool(t, filepath.Join(root, "tools"), "a", "1.0.0", "x.y", "")
	o := watched(t, bare(root))
	stop, done := make(chan struct{}), make(chan struct{})
	for range 3 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
					Load(o)
				}
			}
		}()
	}
	for i := 2; i < 100; i++ {
		v := strconv.Itoa(i) + ".0.0"
		writeTool(t, filepath.Join(root, "tools"), "a", v, "x.y", "")
		if r, _ := Load(o); !slices.Equal(toolNames(r), []string{"a@" + v}) {
			t.Errorf("after writing %s the load found %v", v, toolNames(r))
			break
		}
	}
	close(stop)
	for range 3 {
		<-done
	}
}

// TestMemoMissingFolderMadeWhileArming: a tools folder's parent made
// while the memo starts watching the folder above it.
func TestMemoMissingFolderMadeWhileArming(t *testing.T) {
	for i := range 100 {
		root := t.TempDir()
		o := bare(root)
		o.ToolsDirs, o.Memo = []string{"a/tools"}, &Memo{}
		Load(o)
		made := make(chan struct{})
		go func() { os.Mkdir(filepath.Join(root, "a"), 0o755); close(made) }()
		Load(o) // arms the watch
		<-made
		writeTool(t, filepath.Join(root, "a/tools"), "x", "1.0.0", "x.y", "")
		if r, _ := Load(o); len(toolNames(r)) == 0 {
			t.Fatalf("try %d: the tool made in a/tools after the watch began was not found", i)
		}
	}
}

// TestProtectedIsInTheFingerprint: a path newly protected refuses a
// cached manifest that writes it.
func TestProtectedIsInTheFingerprint(t *testing.T) {
	root := t.TempDir()
	writeTool(t, filepath.Join(root, "tools"), "w", "1.0.0", "x.y", "sandbox: {write: [scripts]}\n")
	o := opts(root)
	o.Builtin = nil
	if r, _ := Load(o); len(r.Problems) != 0 { // writes the cache
		t.Fatal(r.Problems)
	}
	o.Protected = []string{"scripts"}
	if r, _ := Load(o); len(r.Problems) != 1 {
		t.Fatalf("with scripts protected the cached load has %d problems, want 1", len(r.Problems))
	}
}

// TestMemoUnwatchableNotTriedAgain: a project the memo cannot watch (a
// tool.yaml with another name) is not tried again at every load.
func TestMemoUnwatchableNotTriedAgain(t *testing.T) {
	root := t.TempDir()
	writeTool(t, filepath.Join(root, "shared"), "a", "1.0.0", "x.y", "")
	os.MkdirAll(filepath.Join(root, "tools/a"), 0o755)
	os.Link(filepath.Join(root, "shared/a/tool.yaml"), filepath.Join(root, "tools/a/tool.yaml"))
	o := bare(root)
	o.Memo = &Memo{}
	for range 3 {
		Load(o)
	}
	if o.Memo.w != nil || o.Memo.unwatchable != o.Memo.fp {
		t.Fatalf("watching %v, unwatchable %q, fingerprint %q", o.Memo.w != nil, o.Memo.unwatchable, o.Memo.fp)
	}
}
