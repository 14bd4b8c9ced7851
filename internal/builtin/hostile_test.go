package builtin

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
)

func init() { evalMemory = 32 << 20 } // the same code path, reached sooner

// hostileProject has a secret outside the project and links into it.
func hostileProject(t *testing.T) (root, outside string) {
	t.Helper()
	outside = t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP SECRET"), 0o600)
	root = t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(root, "linkdir")))
	must(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "link.txt")))
	must(t, os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(root, "dangling.txt")))
	must(t, os.Symlink("/dev/zero", filepath.Join(root, "zero")))
	must(t, os.MkdirAll(filepath.Join(root, "src"), 0o755))
	must(t, os.Symlink(outside, filepath.Join(root, "src", "inner")))
	must(t, os.WriteFile(filepath.Join(root, "src", "a.txt"), []byte("A"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "dest"), 0o755))
	must(t, os.Symlink(outside, filepath.Join(root, "dest", "evil")))
	return root, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestContainmentThroughSymlinks(t *testing.T) {
	t.Parallel()
	root, outside := hostileProject(t)
	// An archive whose entry lands in dest/evil/, a link to outside.
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("evil/planted.txt")
	w.Write([]byte("x"))
	zw.Close()
	must(t, os.WriteFile(filepath.Join(root, "evil.zip"), zb.Bytes(), 0o644))

	cases := []struct {
		tool, field string
		in          map[string]any
	}{
		{"file.read", "path", map[string]any{"path": "linkdir/secret.txt"}},
		{"file.read", "path", map[string]any{"path": "link.txt"}},
		{"file.write", "path", map[string]any{"path": "linkdir/planted.txt", "content": "x"}},
		{"file.write", "path", map[string]any{"path": "dangling.txt", "content": "x"}},
		{"file.write", "path", map[string]any{"path": "dangling.txt", "content": "x", "append": true}},
		{"file.checksum", "path", map[string]any{"path": "linkdir/secret.txt"}},
		{"file.checksum", "path", map[string]any{"path": "zero"}},
		{"file.list", "dir", map[string]any{"dir": "linkdir"}},
		{"json.query", "path", map[string]any{"path": "link.txt", "query": "."}},
		{"text.render", "output_path", map[string]any{"template": "x", "output_path": "linkdir/out.txt"}},
		{"archive.create", "source", map[string]any{"source": "linkdir", "output": "out.zip"}},
		{"archive.create", "output", map[string]any{"source": "src/a.txt", "output": "linkdir/out.zip"}},
		{"archive.extract", "dest", map[string]any{"archive": "evil.zip", "dest": "dest"}},
		{"archive.extract", "dest", map[string]any{"archive": "evil.zip", "dest": "linkdir"}},
	}
	for _, c := range cases {
		_, err := call(t, c.tool, root, c.in)
		if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s %v: want INVALID_INPUT naming %s, got %v", c.tool, c.in, c.field, err)
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("something was written outside the project: %v", entries)
	}
	// archive.create of a folder holding a link packs only what is inside.
	out, err := call(t, "archive.create", root, map[string]any{"source": "src", "output": "ok.zip"})
	if err != nil || out["count"] != 1 {
		t.Fatalf("archive of src: %v %v", out, err)
	}
}

func TestOverwriteNeedsFlag(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	work := filepath.Join(root, ".capflow", "runs", "r1", "steps", "w")
	must(t, os.MkdirAll(work, 0o755))
	must(t, os.WriteFile(filepath.Join(root, "keep.txt"), []byte("old"), 0o644))
	env := &Env{Root: root, RunDir: filepath.Dir(filepath.Dir(work)), Workdir: work, Feedback: envelope.NewBuilder("t")}
	run := func(name string, in map[string]any) error {
		f, _ := Lookup(name)
		_, err := f(context.Background(), in, env)
		return err
	}
	err := run("file.write", map[string]any{"path": "keep.txt", "content": "new"})
	if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "overwrite") {
		t.Fatalf("replacing a file from before the step: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "keep.txt")); string(b) != "old" {
		t.Fatalf("file changed: %q", b)
	}
	must(t, run("file.write", map[string]any{"path": "keep.txt", "content": "new", "overwrite": true}))
	// A file this step created may be written again by a retry.
	must(t, run("file.write", map[string]any{"path": "made.txt", "content": "1"}))
	must(t, run("file.write", map[string]any{"path": "made.txt", "content": "2"}))
	must(t, run("text.render", map[string]any{"template": "t", "output_path": "made2.txt"}))
	must(t, run("text.render", map[string]any{"template": "t", "output_path": "made2.txt"}))
	if err := run("text.render", map[string]any{"template": "t", "output_path": "keep.txt"}); caperr.CodeOf(err) != caperr.InvalidInput {
		t.Fatalf("render over an old file: %v", err)
	}
	// Extraction: over an old file refused, nothing moved; a retry works.
	must(t, os.MkdirAll(filepath.Join(root, "x"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "x", "b.txt"), []byte("old"), 0o644))
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for _, n := range []string{"a.txt", "b.txt"} {
		w, _ := zw.Create(n)
		w.Write([]byte("new " + n))
	}
	zw.Close()
	must(t, os.WriteFile(filepath.Join(root, "in.zip"), zb.Bytes(), 0o644))
	if err := run("archive.extract", map[string]any{"archive": "in.zip", "dest": "x"}); caperr.CodeOf(err) != caperr.InvalidInput {
		t.Fatalf("extract over an old file: %v", err)
	}
	if names := dirNames(t, filepath.Join(root, "x")); names != "b.txt" {
		t.Fatalf("refused extraction left %q", names)
	}
	must(t, run("archive.extract", map[string]any{"archive": "in.zip", "dest": "y"}))
	must(t, run("archive.extract", map[string]any{"archive": "in.zip", "dest": "y"}))
	must(t, run("archive.extract", map[string]any{"archive": "in.zip", "dest": "x", "overwrite": true}))
	if b, _ := os.ReadFile(filepath.Join(root, "x", "b.txt")); string(b) != "new b.txt" {
		t.Fatalf("overwrite: %q", b)
	}
}

func dirNames(t *testing.T, dir string) string {
	es, err := os.ReadDir(dir)
	must(t, err)
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return strings.Join(n, ",")
}

func TestFailedExtractionLeavesNothing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("ok.txt")
	w.Write([]byte("fine"))
	w, _ = zw.Create("../../slip.txt")
	w.Write([]byte("x"))
	zw.Close()
	must(t, os.WriteFile(filepath.Join(root, "slip.zip"), zb.Bytes(), 0o644))
	_, err := call(t, "archive.extract", root, map[string]any{"archive": "slip.zip", "dest": "out"})
	if caperr.CodeOf(err) != caperr.InvalidInput {
		t.Fatalf("zip slip: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "out")); !os.IsNotExist(err) {
		t.Fatalf("a failed extraction left its folder behind: %v", err)
	}
}

// Found in review: an extraction that fails part-way must not have
// changed anything, and a path's own faults are bad input (exit 2).
func TestExtractionChecksEveryTargetFirst(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	zipOf := func(name string, entries ...string) {
		var zb bytes.Buffer
		zw := zip.NewWriter(&zb)
		for _, e := range entries {
			w, _ := zw.Create(e)
			w.Write([]byte("new " + e))
		}
		zw.Close()
		must(t, os.WriteFile(filepath.Join(root, name), zb.Bytes(), 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(root, "d", "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "d", "blocker"), []byte("old"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "d", "a1.txt"), []byte("old"), 0o644))
	zipOf("one.zip", "aaa.txt", "blocker/x.txt")
	zipOf("two.zip", "a1.txt", "sub")
	zipOf("three.zip", "a", "a/b")
	for _, c := range []struct {
		archive   string
		overwrite bool
	}{{"one.zip", false}, {"two.zip", true}, {"three.zip", true}} {
		_, err := call(t, "archive.extract", root, map[string]any{"archive": c.archive, "dest": "d", "overwrite": c.overwrite})
		if caperr.CodeOf(err) != caperr.InvalidInput {
			t.Errorf("%s: want INVALID_INPUT, got %v", c.archive, err)
		}
	}
	if names := dirNames(t, filepath.Join(root, "d")); names != "a1.txt,blocker,sub" {
		t.Fatalf("a refused extraction changed dest: %s", names)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "d", "a1.txt")); string(b) != "old" {
		t.Fatalf("a refused extraction replaced a file: %q", b)
	}
	for _, c := range []struct {
		tool string
		in   map[string]any
	}{
		{"file.write", map[string]any{"path": "d/sub", "content": "x", "overwrite": true}},
		{"file.read", map[string]any{"path": strings.Repeat("n", 5000)}},
	} {
		if _, err := call(t, c.tool, root, c.in); caperr.CodeOf(err) != caperr.InvalidInput {
			t.Errorf("%s %v: want INVALID_INPUT, got %v", c.tool, c.in["path"], err)
		}
	}
}

// TestBuiltinsWriteNothingTheEngineTrusts: file.write, text.render,
// archive.create and archive.extract write the step's folder or the
// project, never what the engine trusts or runs unconfined (the policy,
// tools, the configuration, other runs' records), not through a link
// either, and nothing of the run's folder but the step's own (found
// attacking issue 53: a plan rewrote policy.yaml, then ran a tool it
// wrote).
func TestBuiltinsWriteNothingTheEngineTrusts(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, ".capflow", "runs", "r")
	work := filepath.Join(run, "steps", "s")
	for _, d := range []string{work, filepath.Join(root, "tools", "noop"), filepath.Join(root, ".capflow", "runs", "other", "records", "a"), filepath.Join(root, "data")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(root, "policy.yaml"), []byte("sandbox: default\n"), 0o644)
	os.WriteFile(filepath.Join(root, "data", "a.txt"), []byte("a"), 0o644)
	os.Symlink("tools", filepath.Join(root, "innocent"))
	os.Symlink("../policy.yaml", filepath.Join(root, "data", "p.yaml"))
	os.Symlink("../policy.yaml", filepath.Join(root, "data", "q.yaml"))
	env := func() *Env {
		return &Env{Root: root, RunDir: run, Workdir: work, Feedback: envelope.NewBuilder("w"),
			Protected: []string{".capflow/state", ".capflow/runs", "tools", "kits", "capflow.yaml", "policy.yaml", ".git"}}
	}
	for _, c := range []struct {
		tool, field string
		in          map[string]any
	}{
		{"file.write", "path", map[string]any{"path": "policy.yaml", "content": "sandbox: off", "overwrite": true}},
		{"file.write", "path", map[string]any{"path": "tools/evil/tool.yaml", "content": "x"}},
		{"file.write", "path", map[string]any{"path": "capflow.yaml", "content": "x"}},
		{"file.write", "path", map[string]any{"path": ".capflow/runs/other/records/a/started.json", "content": "{}", "overwrite": true}},
		{"file.write", "path", map[string]any{"path": filepath.Join(run, "records", "s", "input.json"), "content": "{}"}},
		{"file.write", "path", map[string]any{"path": "innocent/evil/tool.yaml", "content": "x"}},
		{"file.write", "path", map[string]any{"path": "data/q.yaml", "content": "sandbox: off", "append": true}},
		{"text.render", "output_path", map[string]any{"template": "x", "output_path": "tools/t.txt"}},
		{"archive.create", "output", map[string]any{"source": "data", "output": "kits/x.zip"}},
		{"archive.extract", "dest", map[string]any{"archive": "x.zip", "dest": "."}},
	} {
		_, err := callIn(c.tool, env(), c.in)
		if caperr.CodeOf(err) != caperr.InvalidInput {
			t.Errorf("%s %v: %v", c.tool, c.in[c.field], err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "policy.yaml")); string(b) != "sandbox: default\n" {
		t.Fatalf("policy.yaml: %q", b)
	}
	if _, err := os.Stat(filepath.Join(root, "tools", "evil")); err == nil {
		t.Fatal("a tool was planted")
	}
	// A link in the project's own folder is replaced, not followed.
	if _, err := callIn("file.write", env(), map[string]any{"path": "data/p.yaml", "content": "sandbox: off", "overwrite": true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "policy.yaml")); string(b) != "sandbox: default\n" {
		t.Fatalf("policy.yaml through a link: %q", b)
	}
	for _, p := range []string{"out/x.txt", filepath.Join(work, "y.txt")} {
		if _, err := callIn("file.write", env(), map[string]any{"path": p, "content": "ok"}); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestBuiltinsReadNoOtherRun: a builtin reads the project and its own
// run, not another run's folder nor the engine's state.
func TestBuiltinsReadNoOtherRun(t *testing.T) {
	root := t.TempDir()
	runs := filepath.Join(root, ".capflow", "runs")
	for _, d := range []string{filepath.Join(runs, "mine", "steps", "s"), filepath.Join(runs, "other")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(runs, "other", "envelopes.jsonl"), []byte("OTHER"), 0o644)
	os.WriteFile(filepath.Join(runs, "mine", "envelopes.jsonl"), []byte("MINE"), 0o644)
	env := &Env{Root: root, RunDir: filepath.Join(runs, "mine"), Workdir: filepath.Join(runs, "mine", "steps", "s"), Feedback: envelope.NewBuilder("r"),
		Private: []string{runs, filepath.Join(root, ".capflow", "state")}}
	if _, err := callIn("file.read", env, map[string]any{"path": ".capflow/runs/other/envelopes.jsonl"}); caperr.CodeOf(err) != caperr.InvalidInput {
		t.Fatalf("another run's folder: %v", err)
	}
	if got, err := callIn("file.read", env, map[string]any{"path": filepath.Join(runs, "mine", "envelopes.jsonl")}); err != nil || got["content"] != "MINE" {
		t.Fatalf("its own run: %v %v", got, err)
	}
}

// TestLinksInTheProjectLeadNowhere: a link a tool left in the project (in
// its write: folder) leads a builtin neither into another run's folder
// nor, through an archive's entries, into what the engine trusts (found
// attacking issue 53, second round).
func TestLinksInTheProjectLeadNowhere(t *testing.T) {
	root := t.TempDir()
	runs := filepath.Join(root, ".capflow", "runs")
	for _, d := range []string{filepath.Join(runs, "mine", "steps", "s"), filepath.Join(runs, "other"), filepath.Join(root, "out", "xt"), filepath.Join(root, "stage", "xt", "l")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(runs, "other", "report.json"), []byte(`{"secret":"OTHER"}`), 0o644)
	os.WriteFile(filepath.Join(root, "policy.yaml"), []byte("sandbox: default\n"), 0o644)
	os.WriteFile(filepath.Join(root, "stage", "xt", "l", "policy.yaml"), []byte("sandbox: off\n"), 0o644)
	os.Symlink("../.capflow/runs", filepath.Join(root, "out", "l"))
	os.Symlink("../..", filepath.Join(root, "out", "xt", "l"))
	env := func() *Env {
		return &Env{Root: root, RunDir: filepath.Join(runs, "mine"), Workdir: filepath.Join(runs, "mine", "steps", "s"), Feedback: envelope.NewBuilder("x"),
			Private: []string{runs}, Protected: []string{".capflow/state", ".capflow/runs", "tools", "kits", "capflow.yaml", "policy.yaml", ".git"}}
	}
	for _, c := range []struct {
		tool string
		in   map[string]any
	}{
		{"file.read", map[string]any{"path": "out/l/other/report.json"}},
		{"file.list", map[string]any{"dir": "out/l"}},
		{"file.checksum", map[string]any{"path": "out/l/other/report.json"}},
		{"archive.create", map[string]any{"source": "out/l", "output": "packs/runs.zip"}},
	} {
		if got, err := callIn(c.tool, env(), c.in); caperr.CodeOf(err) != caperr.InvalidInput || strings.Contains(fmt.Sprint(got), "OTHER") {
			t.Errorf("%s %v: %v %v", c.tool, c.in, got, err)
		}
	}
	if _, err := callIn("archive.create", env(), map[string]any{"source": "stage", "output": "packs/x.zip"}); err != nil {
		t.Fatal(err)
	}
	_, err := callIn("archive.extract", env(), map[string]any{"archive": "packs/x.zip", "dest": "out", "overwrite": true})
	if caperr.CodeOf(err) != caperr.InvalidInput {
		t.Errorf("extracting through a link in dest: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "policy.yaml")); string(b) != "sandbox: default\n" {
		t.Fatalf("policy.yaml: %q", b)
	}
}

// A builtin writes nothing where a trusted path really leads: tools a
// link to src/tools inside the project, a write to src/tools changed
// what runs (found attacking the sandbox's write folders, the same rule).
func TestBuiltinsWriteNothingATrustedPathLeadsTo(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "src", "tools", "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/tools", filepath.Join(root, "tools")); err != nil {
		t.Fatal(err)
	}
	env := &Env{Root: root, Workdir: t.TempDir(), Feedback: envelope.NewBuilder("x"), Protected: []string{"tools", "kits", "capflow.yaml", "policy.yaml", ".git"}}
	_, err := callIn("file.write", env, map[string]any{"path": "src/tools/t/run.sh", "content": "evil"})
	if _, serr := os.Stat(filepath.Join(root, "src", "tools", "t", "run.sh")); caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(fmt.Sprint(err), "where tools leads") || serr == nil {
		t.Fatalf("%v (the file: %v): want the write refused", err, serr)
	}
}

// Nor where a trusted link would lead though its target is missing yet
// (found attacking: policy.yaml a link to conf/policy.yaml, made by a
// write).
func TestBuiltinsWriteNothingATrustedLinkWouldLeadTo(t *testing.T) {
	root := t.TempDir()
	if err := os.Symlink("conf/policy.yaml", filepath.Join(root, "policy.yaml")); err != nil {
		t.Fatal(err)
	}
	env := &Env{Root: root, Workdir: t.TempDir(), Feedback: envelope.NewBuilder("x"), Protected: []string{"tools", "kits", "capflow.yaml", "policy.yaml", ".git"}}
	_, err := callIn("file.write", env, map[string]any{"path": "conf/policy.yaml", "content": "sandbox: off\n"})
	if _, serr := os.Stat(filepath.Join(root, "conf", "policy.yaml")); caperr.CodeOf(err) != caperr.InvalidInput || serr == nil {
		t.Fatalf("%v (the file: %v): want the write refused", err, serr)
	}
	// Nor replace a link midway along one (kits a link to build/current,
	// itself a link to ../releases/v3).
	for link, to := range map[string]string{"kits": "build/current", "build/current": "../releases/v3"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = callIn("file.write", env, map[string]any{"path": "build/current", "content": "mine", "overwrite": true})
	if to, _ := os.Readlink(filepath.Join(root, "build", "current")); caperr.CodeOf(err) != caperr.InvalidInput || to != "../releases/v3" {
		t.Fatalf("%v (build/current now %q): want the write refused", err, to)
	}
}

// A link at the end of a path, at the project's top: an append does not
// follow it into the policy, and a read does not follow it into another
// run's folder (found reviewing).
func TestALinkAtThePathsEndLeadsNowhereTrusted(t *testing.T) {
	root := t.TempDir()
	runs := filepath.Join(root, ".capflow", "runs")
	if err := os.MkdirAll(filepath.Join(runs, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f, b := range map[string]string{"policy.yaml": "sandbox: default\n", ".capflow/runs/other/report.json": "OTHER"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"notes.txt": "policy.yaml", "seen.json": ".capflow/runs/other/report.json"} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	env := &Env{Root: root, RunDir: filepath.Join(runs, "mine"), Workdir: t.TempDir(), Feedback: envelope.NewBuilder("x"), Private: []string{runs},
		Protected: []string{".capflow/state", ".capflow/runs", "tools", "kits", "capflow.yaml", "policy.yaml", ".git"}}
	_, werr := callIn("file.write", env, map[string]any{"path": "notes.txt", "content": "sandbox: off\n", "append": true})
	got, rerr := callIn("file.read", env, map[string]any{"path": "seen.json"})
	if b, _ := os.ReadFile(filepath.Join(root, "policy.yaml")); string(b) != "sandbox: default\n" || werr == nil || caperr.CodeOf(rerr) != caperr.InvalidInput || strings.Contains(fmt.Sprint(got), "OTHER") {
		t.Fatalf("policy %q after the append (%v); the read: %v %v: want both refused", b, werr, got, rerr)
	}
}
