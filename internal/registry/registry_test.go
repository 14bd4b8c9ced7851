package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/kits"
)

func writeTool(t *testing.T, dir, name, version, caps string, extra string) {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "name: " + name + "\nversion: " + version + "\ndescription: test tool\ncapabilities: [" + caps + "]\nentrypoint: {type: builtin, name: file.read}\n" + extra
	if err := os.WriteFile(filepath.Join(d, "tool.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeKit(t *testing.T, root, id string) string {
	t.Helper()
	d := filepath.Join(root, "kits", id)
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "kit.yaml"), []byte("id: "+id+"\nversion: 1.0.0\ndescription: kit "+id+"\n"), 0o644)
	return d
}

func opts(root string, active ...string) Options {
	return Options{Root: root, KitsDirs: []string{"kits"}, ToolsDirs: []string{"tools"}, ActiveKits: active, StateDir: ".capflow/state", Builtin: kits.Builtin()}
}

func TestResolutionOrder(t *testing.T) {
	root := t.TempDir()
	k := writeKit(t, root, "extra")
	writeTool(t, k, "conv-stable", "1.0.0", "video.convert", "")
	writeTool(t, k, "conv-exp", "9.0.0", "video.convert", "stability: experimental\npriority: 100\n")
	writeTool(t, k, "conv-prio", "0.1.0", "video.convert", "priority: 5\n")
	writeTool(t, k, "conv-new", "2.0.0", "video.convert", "")
	writeTool(t, k, "zip-b", "1.0.0", "zip.pack", "")
	writeTool(t, k, "zip-a", "1.0.0", "zip.pack", "")
	r, err := Load(opts(root, "extra"))
	if err != nil || len(r.Problems) > 0 {
		t.Fatalf("%v %v", err, r.Problems)
	}
	res, err := r.Resolve("video.convert", "")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, c := range res.Candidates {
		order = append(order, c.Name)
	}
	if got := strings.Join(order, ","); got != "conv-prio,conv-new,conv-stable,conv-exp" {
		t.Fatalf("ranking = %s", got)
	}
	if !strings.Contains(res.Candidates[3].Reason, "experimental ranks below stable conv-stable") || !strings.Contains(res.Candidates[1].Reason, "priority 0 is lower") ||
		!strings.Contains(res.Candidates[2].Reason, "version 1.0.0 is older than conv-new@2.0.0") {
		t.Fatalf("reasons: %+v", res.Candidates)
	}
	zr, _ := r.Resolve("zip.pack", "")
	if zr.Chosen.Name != "zip-a" || !strings.Contains(zr.Candidates[1].Reason, "sorts after") {
		t.Fatalf("name tie-break: %+v", zr.Candidates)
	}
	// A project tool shadows every kit tool, whatever its rank.
	writeTool(t, filepath.Join(root, "tools"), "my-conv", "0.0.1", "video.convert", "stability: experimental\n")
	r, _ = Load(opts(root, "extra"))
	res, _ = r.Resolve("video.convert", "")
	if res.Chosen.Name != "my-conv" || res.Chosen.Source != "project" || !strings.Contains(res.Candidates[1].Reason, "comes first in tool_resolution_order") {
		t.Fatalf("project tools should win: %+v", res)
	}
	// ...unless the order says otherwise.
	o := opts(root, "extra")
	o.Order = []string{ActiveKits, ProjectTools}
	r, _ = Load(o)
	res, _ = r.Resolve("video.convert", "")
	if res.Chosen.Name != "conv-prio" {
		t.Fatalf("order not honoured: %s", res.Chosen.Name)
	}
	// Pins.
	res, err = r.Resolve("video.convert", "conv-new@2")
	if err != nil || res.Chosen.Name != "conv-new" || !strings.Contains(res.Chosen.Reason, "pinned") {
		t.Fatalf("pin: %v %+v", err, res)
	}
	if _, err = r.Resolve("video.convert", "conv-new@3"); caperr.CodeOf(err) != caperr.ToolNotFound {
		t.Fatalf("bad pin: %v", err)
	}
	_, err = r.Resolve("video.convrt", "")
	if caperr.CodeOf(err) != caperr.ToolNotFound || !strings.Contains(err.Error(), `did you mean "video.convert"?`) {
		t.Fatalf("missing capability: %v", err)
	}
}

func TestProblems(t *testing.T) {
	root := t.TempDir()
	writeTool(t, filepath.Join(root, "tools"), "dup", "1.0.0", "a.b", "")
	// same name in another folder of the same source
	d := filepath.Join(root, "tools", "dup-copy")
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "tool.yaml"), []byte("name: dup\nversion: 1.0.0\ndescription: x\ncapabilities: [a.b]\nentrypoint: {type: builtin, name: x}\n"), 0o644)
	writeTool(t, filepath.Join(root, "tools"), "broken", "x", "a.b", "")
	r, err := Load(opts(root, "core", "nope"))
	if err != nil {
		t.Fatal(err)
	}
	joined := caperr.Problems(r.Problems).Error()
	for _, want := range []string{`duplicate tool name "dup" in project`, `version "x" is not semver`, `active kit "nope" not found`} {
		if !strings.Contains(joined, want) {
			t.Errorf("missing %q in\n%s", want, joined)
		}
	}
	// The builtin core kit is always findable.
	if r.Tool("file-checksum", "") == nil {
		t.Fatal("builtin core kit not loaded")
	}
	// A capability no tool provides says the broken manifests may hold it.
	if _, err := r.Resolve("c.d", ""); err == nil || !strings.Contains(err.Error(), "no tool provides c.d (3 manifest problems keep some tools out: see capflow tools validate)") {
		t.Errorf("resolve with broken manifests: %v", err)
	}
}

func TestCache(t *testing.T) {
	root := t.TempDir()
	writeTool(t, filepath.Join(root, "tools"), "one", "1.0.0", "a.b", "")
	o := opts(root, "core")
	o.Builtin = kits.Builtin()
	r1, _ := Load(o)
	cacheFile := filepath.Join(root, ".capflow/state", CacheFile)
	if _, err := os.Stat(cacheFile); err != nil {
		t.Fatal("cache not written")
	}
	r2, _ := Load(o)
	if len(r2.Tools) != len(r1.Tools) || r2.Tool("one", "").Digest != r1.Tool("one", "").Digest || len(r2.Warnings) != 0 {
		t.Fatal("cache read differs")
	}
	// A changed manifest is picked up.
	time.Sleep(10 * time.Millisecond)
	writeTool(t, filepath.Join(root, "tools"), "one", "1.1.0", "a.b", "")
	r3, _ := Load(o)
	if r3.Tool("one", "").Version != "1.1.0" {
		t.Fatal("stale cache used after a manifest changed")
	}
	// A corrupt cache is rebuilt with a warning, never a failure.
	os.WriteFile(cacheFile, []byte("{garbage"), 0o644)
	r4, err := Load(o)
	if err != nil || r4.Tool("one", "") == nil || len(r4.Warnings) != 1 || !strings.Contains(r4.Warnings[0], "corrupt") {
		t.Fatalf("corrupt cache: %v %+v", err, r4.Warnings)
	}
}

// The kits that ship with capflow work in a project anywhere: core and
// runtime from the binary, media (scripts) from its copy put on disk,
// unless the project has a kit of the same id (issue 54).
func TestBuiltinKitsAnywhere(t *testing.T) {
	root, cache := t.TempDir(), t.TempDir()
	o := opts(root, "core", "media", "runtime")
	o.KitCache = cache
	r, err := Load(o)
	if err != nil || len(r.Problems) > 0 {
		t.Fatalf("%v %v", err, r.Problems)
	}
	for capability, where := range map[string]string{"file.read": "builtin:core/", "server.start": "builtin:runtime/", "video.convert": cache + "/"} {
		tools := r.Providers(capability)
		if len(tools) != 1 || !strings.HasPrefix(tools[0].File, where) && !strings.HasPrefix(tools[0].Dir, where) {
			t.Fatalf("%s: %+v, want it from %s", capability, tools, where)
		}
	}
	vc := r.Providers("video.convert")[0]
	if _, err := os.Stat(filepath.Join(vc.Dir, "run.py")); err != nil || vc.Kit != "media" {
		t.Fatalf("video-convert's script is not beside it: %v (kit %q)", err, vc.Kit)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(vc.Dir), "lib", "capflow_tool.py")); err != nil {
		t.Fatalf("media's lib is not on disk: %v", err)
	}
	// A project's own media kit comes first.
	writeTool(t, writeKit(t, root, "media"), "mine", "1.0.0", "video.convert", "")
	r, _ = Load(o)
	if tools := r.Providers("video.convert"); len(tools) != 1 || tools[0].Name != "mine" {
		t.Fatalf("the project's media kit is not used: %+v", tools)
	}
}
