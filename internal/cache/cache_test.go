package cache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/seal"
)

func TestPathsFollowTheSchema(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"video": map[string]any{"type": "string", "format": "path"},
		"title": map[string]any{"type": "string"},
		"parts": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
			"file": map[string]any{"type": "string", "x-capflow-artifact": true}}}},
		"by/name": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string", "format": "path"}},
	}}
	value := map[string]any{"video": "/v.mp4", "title": "/not/a/file", "parts": []any{map[string]any{"file": "a"}, map[string]any{"file": "b"}},
		"by/name": map[string]any{"x": "/x"}, "undeclared": "/u"}
	got, err := Paths(schema, value)
	want := []PathField{{"/by~1name/x", "/x"}, {"/parts/0/file", "a"}, {"/parts/1/file", "b"}, {"/video", "/v.mp4"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("paths %v (%v), want %v", got, err, want)
	}
	if !Set(value, "/parts/1/file", "B") || value["parts"].([]any)[1].(map[string]any)["file"] != "B" {
		t.Fatal("set in a list")
	}
	if !Set(value, "/by~1name/x", "X") || value["by/name"].(map[string]any)["x"] != "X" {
		t.Fatal("set under an escaped key")
	}
	if Set(value, "/parts/9/file", "?") || Set(value, "/title/x", "?") {
		t.Fatal("set where nothing is")
	}
}

// A walk costs what the value is: no pointer is made for what the schema
// does not describe or marks as no file, and past MaxPathFields files or a
// pointer past MaxPointer it stops (a tool's 700,000 undescribed keys took
// 4.5 GB; one long key above many files, terabytes: found attacking issue 57).
func TestPathsAreBounded(t *testing.T) {
	files := map[string]any{"type": "object", "properties": map[string]any{"report": map[string]any{"format": "path"}},
		"additionalProperties": map[string]any{"type": "array", "items": map[string]any{"format": "path"}}}
	undescribed := map[string]any{"report": "r.txt"}
	for i := range 700000 {
		undescribed[fmt.Sprintf("k%07d", i)] = 1
	}
	long := strings.Repeat("k", 64<<10)
	many := make([]any, MaxPathFields+1)
	for i := range many {
		many[i] = "f"
	}
	for _, c := range []struct {
		name  string
		value any
		files int
		err   string
	}{
		{"700,000 keys that are no file", undescribed, 1, ""},
		{"one key past MaxPointer", map[string]any{long: []any{"a", "b"}}, 0, "a value its schema marks as a file under keys longer than 1024 bytes together"},
		{"more files than MaxPathFields", map[string]any{"k": many}, 0, "more than 1000 values its schema marks as files"},
	} {
		var got []PathField
		var err error
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		got, err = Paths(files, c.value)
		runtime.ReadMemStats(&m1)
		if len(got) != c.files || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) || m1.TotalAlloc-m0.TotalAlloc > 1<<20 {
			t.Errorf("%s: %d files, %v, %d bytes allocated", c.name, len(got), err, m1.TotalAlloc-m0.TotalAlloc)
		}
	}
}

// Every part of the key counts: tool, its files, each input byte, each
// input file.
func TestKeyChangesWithEveryPart(t *testing.T) {
	base := Parts{Tool: "d1", ToolFiles: "f1", Inputs: []byte(`{"a":1}`), Files: []string{"/src aa"}}
	k := Key(base)
	if Key(base) != k || len(k) != 64 {
		t.Fatalf("key %q is not stable", k)
	}
	for name, p := range map[string]Parts{
		"tool":       {Tool: "d2", ToolFiles: "f1", Inputs: base.Inputs, Files: base.Files},
		"tool files": {Tool: "d1", ToolFiles: "f2", Inputs: base.Inputs, Files: base.Files},
		"input":      {Tool: "d1", ToolFiles: "f1", Inputs: []byte(`{"a":2}`), Files: base.Files},
		"input file": {Tool: "d1", ToolFiles: "f1", Inputs: base.Inputs, Files: []string{"/src bb"}},
		// No ambiguity between where inputs end and files begin.
		"shifted": {Tool: "d1", ToolFiles: "f1", Inputs: []byte(`{"a":1}` + "\nfile /src aa"), Files: nil},
	} {
		if Key(p) == k {
			t.Errorf("a changed %s keeps the key", name)
		}
	}
}

func TestFileDigestOfFilesAndFolders(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.txt")
	must(t, os.WriteFile(f, []byte("one"), 0o644))
	d1, n, err := FileDigest(f)
	if err != nil || n != 3 || d1 != artifacts.Digest([]byte("one")) {
		t.Fatalf("file digest %s %d %v", d1, n, err)
	}
	t1, _, err := FileDigest(dir)
	must(t, err)
	must(t, os.WriteFile(f, []byte("two"), 0o644))
	t2, _, _ := FileDigest(dir)
	must(t, os.Rename(f, filepath.Join(dir, "b.txt")))
	t3, _, _ := FileDigest(dir)
	if t1 == t2 || t2 == t3 {
		t.Fatalf("a folder's digest misses a changed byte or name: %s %s %s", t1, t2, t3)
	}
	if _, _, err := FileDigest(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Fatalf("missing: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Lookup honours the TTL, Find takes unique prefixes, Purge by age.
func TestEntriesLookupFindPurge(t *testing.T) {
	ctx := context.Background()
	s, err := artifacts.Open(ctx, artifacts.Options{StateDir: t.TempDir()})
	must(t, err)
	c := Cache{Store: s}
	now := time.Now()
	old := Entry{Key: Key(Parts{Tool: "old"}), Tool: "t@1", Run: "r1", Step: "a", Created: now.Add(-48 * time.Hour)}
	fresh := Entry{Key: Key(Parts{Tool: "fresh"}), Tool: "t@1", Run: "r2", Step: "a", Created: now.Add(-time.Hour)}
	must(t, c.Save(ctx, old))
	must(t, c.Save(ctx, fresh))
	if e, why, err := c.Lookup(ctx, fresh.Key, 2*time.Hour, now); err != nil || e == nil || e.Run != "r2" {
		t.Fatalf("fresh entry: %v %q %v", e, why, err)
	}
	if e, why, _ := c.Lookup(ctx, old.Key, 24*time.Hour, now); e != nil || why == "" {
		t.Fatalf("an entry past its ttl was used: %v", e)
	}
	if e, why, _ := c.Lookup(ctx, Key(Parts{Tool: "none"}), time.Hour, now); e != nil || why != "no entry" {
		t.Fatalf("no entry: %v %q", e, why)
	}
	list, err := c.List(ctx)
	if err != nil || len(list) != 2 || list[0].Key != fresh.Key {
		t.Fatalf("list: %v %v", list, err)
	}
	if e, err := c.Find(ctx, fresh.Key[:8]); err != nil || e.Key != fresh.Key {
		t.Fatalf("find by prefix: %v %v", e, err)
	}
	for _, bad := range []string{"abc", "zzzzzzzz", "../../x"} {
		if _, err := c.Find(ctx, bad); caperr.CodeOf(err) != caperr.InvalidInput {
			t.Fatalf("find %q: %v", bad, err)
		}
	}
	gone, err := c.Purge(ctx, 24*time.Hour, now)
	if err != nil || len(gone) != 1 || gone[0].Key != old.Key {
		t.Fatalf("purge older than a day: %v %v", gone, err)
	}
	gone, _ = c.Purge(ctx, 0, now)
	if len(gone) != 1 {
		t.Fatalf("purge all: %v", gone)
	}
	if list, _ := c.List(ctx); len(list) != 0 {
		t.Fatalf("left after purge: %v", list)
	}
}

// The memo answers an unchanged file without reading it, and sees a
// changed one.
func TestMemoSeesChanges(t *testing.T) {
	f := filepath.Join(t.TempDir(), "in.bin")
	must(t, os.WriteFile(f, []byte("one"), 0o644))
	var m Memo
	d1, _, err := m.Digest(f)
	must(t, err)
	if again, _, _ := m.Digest(f); again != d1 || len(m.m) != 1 {
		t.Fatalf("memo: %s vs %s, %d remembered", again, d1, len(m.m))
	}
	must(t, os.WriteFile(f, []byte("two!"), 0o644))
	if d2, _, _ := m.Digest(f); d2 == d1 || d2 != artifacts.Digest([]byte("two!")) {
		t.Fatalf("a changed file kept its digest")
	}
}

// TestEntriesAreSealed: an entry rewritten in the store (the hostile
// audit's M3: a tool that could write the store pointed another run's
// entry at its own blob) is a miss, saying why.
func TestEntriesAreSealed(t *testing.T) {
	t.Setenv(seal.KeyFile, filepath.Join(t.TempDir(), "key"))
	ctx := context.Background()
	dir := t.TempDir()
	store, err := artifacts.Open(ctx, artifacts.Options{URL: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	c := Cache{Store: store}
	key := Key(Parts{Tool: "t", Inputs: []byte("{}")})
	good, _ := store.Put(ctx, []byte(`{"out":"genuine"}`))
	now := time.Now().UTC()
	// A message cut through a character (invalid UTF-8) is stored and
	// read back as it was written: the seal still holds.
	entry := Entry{Key: key, Tool: "t@1", Run: "r1", Created: now, Data: good}
	entry.Envelope.Message = "ответ\xd0"
	if err := c.Save(ctx, entry); err != nil {
		t.Fatal(err)
	}
	if e, why, err := c.Lookup(ctx, key, time.Hour, now); e == nil || err != nil {
		t.Fatalf("a sealed entry: %s %v", why, err)
	}
	file := filepath.Join(dir, Name(key))
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := store.Put(ctx, []byte(`{"out":"POISONED"}`))
	if err := os.WriteFile(file, []byte(strings.Replace(string(raw), good, bad, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if e, why, err := c.Lookup(ctx, key, time.Hour, now); e != nil || err != nil || !strings.Contains(why, "seal does not hold") {
		t.Fatalf("a rewritten entry: %+v %q %v", e, why, err)
	}
}
