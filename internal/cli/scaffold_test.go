package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScaffoldValidatesAndRuns(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := capflow(t, "tools", "scaffold", "pdf-merge", "--capability", "pdf.merge", "--project", dir, "--output", "json")
	if code != 0 {
		t.Fatalf("scaffold: %s", out)
	}
	if st, err := os.Stat(filepath.Join(dir, "tools/pdf-merge/run.sh")); err != nil || st.Mode()&0o100 == 0 {
		t.Fatal("run.sh missing or not executable")
	}
	if code, out, _ = capflow(t, "tools", "validate", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("scaffolded tool does not validate: %s", out)
	}
	code, out, _ = capflow(t, "tools", "run", "pdf-merge", "--project", dir, "--output", "json")
	env := envelopeOf(t, out)
	if code != 0 || env.ToolID != "pdf-merge" || !env.Success {
		t.Fatalf("scaffolded tool does not run: %s", out)
	}
	// A second scaffold refuses to overwrite.
	if code, _, _ = capflow(t, "tools", "scaffold", "pdf-merge", "--capability", "pdf.merge", "--project", dir); code != 2 {
		t.Fatalf("overwrite not refused: exit %d", code)
	}
}

// tools scaffold renders the project's templates/tool when it has them:
// the built-in ones written there, edited, make the next tool.
func TestScaffoldUsesTheProjectsTemplates(t *testing.T) {
	dir := t.TempDir()
	if code, out, _ := capflow(t, "tools", "scaffold", "--write-templates", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("write templates: %s", out)
	}
	tmpl := filepath.Join(dir, "templates/tool/run.sh.tmpl")
	b, err := os.ReadFile(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmpl, []byte(strings.Replace(string(b), "scaffold: no logic yet", "our own template", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(dir, "templates/tool/NOTES.md.tmpl")
	if err := os.WriteFile(extra, []byte("{{.Name}} provides {{.Capability}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := capflow(t, "tools", "scaffold", "ours", "--capability", "our.thing", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("scaffold: %s", out)
	}
	if notes, _ := os.ReadFile(filepath.Join(dir, "tools/ours/NOTES.md")); string(notes) != "ours provides our.thing\n" {
		t.Fatalf("NOTES.md: %q", notes)
	}
	code, out, _ := capflow(t, "tools", "run", "ours", "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 0 || env.Message != "ours returned sample data: its run.sh is the scaffold's (our own template)" {
		t.Fatalf("run: %s", out)
	}
	// Written once: a second --write-templates would overwrite edits.
	if code, _, _ := capflow(t, "tools", "scaffold", "--write-templates", "--project", dir); code != 2 {
		t.Fatalf("templates overwritten: exit %d", code)
	}
}

// Shell completion offers tools by name and uid, and (with no server)
// completes no run ID rather than hanging or failing.
func TestCompletion(t *testing.T) {
	root := repoRoot(t)
	_, out, _ := capflow(t, "__complete", "tools", "show", "--project", root, "")
	if !strings.Contains(out, "file-read\tfile.read\n") || !strings.Contains(out, "core/file-read\n") {
		t.Fatalf("tools: %s", out)
	}
	_, out, _ = capflow(t, "__complete", "--address", "127.0.0.1:1", "status", "")
	if !strings.HasSuffix(strings.TrimSpace(out), ":4") {
		t.Fatalf("runs: %s", out)
	}
}

// A template folder's link that leaves it is refused, and nothing of its
// target is written into the new tool.
func TestHostileScaffoldTemplateLink(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("the worker's key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := capflow(t, "tools", "scaffold", "--write-templates", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("write templates: %s", out)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "templates/tool/stolen.txt")); err != nil {
		t.Fatal(err)
	}
	code, out, _ := capflow(t, "tools", "scaffold", "thief", "--capability", "x.y", "--project", dir, "--output", "json")
	b, _ := os.ReadFile(filepath.Join(dir, "tools/thief/stolen.txt"))
	if code != 2 || strings.Contains(string(b), "the worker's key") {
		t.Fatalf("exit %d, stolen.txt %q: %s", code, b, out)
	}
}

// tools scaffold takes schemas from files and makes command, http and
// builtin tools; a mistake is refused with its place, exit 2 (issue 54).
func TestScaffoldSchemasAndEntrypoints(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	in := write("in.yaml", "type: object\nrequired: [text]\nproperties:\n  text: {type: string}\n")
	outS := write("out.json", `{"type": "object", "required": ["words"], "properties": {"words": {"type": "integer"}}}`)
	bad := write("bad.yaml", "type: object\nproperties:\n  n: {type: intger}\n")
	for _, c := range []struct {
		args   []string
		code   int
		want   string // in the message (failures) or the tool.yaml written
		runSh  bool
		schema string // a key of input_schema.properties written
	}{
		{[]string{"words", "--capability", "text.words", "--input-schema", in, "--output-schema", outS}, 0, "- ./run.sh", true, "text"},
		{[]string{"remote-words", "--capability", "text.words", "--entrypoint", "http", "--url", "https://words.example/count", "--alongside"}, 0, `url: "https://words.example/count"`, false, ""},
		{[]string{"more-words", "--capability", "text.words"}, 2, "text.words is already provided by remote-words@0.1.0 (project), words@0.1.0 (project): a new tool would serve it to every plan of the project wherever it ranks first", false, ""},
		{[]string{"report", "--capability", "report.render", "--entrypoint", "builtin", "--builtin", "text.render"}, 0, "name: text.render", false, "template"},
		{[]string{"w1", "--capability", "text.words", "--input-schema", bad}, 2, `bad.yaml:3:7: properties.n.type: not a valid JSON Schema`, false, ""},
		{[]string{"w2", "--capability", "text.words", "--entrypoint", "http"}, 2, "--entrypoint http needs --url", false, ""},
		{[]string{"w3", "--capability", "text.rendr", "--entrypoint", "builtin"}, 2, `no builtin "text.rendr" (did you mean "text.render"?)`, false, ""},
		{[]string{"w4", "--capability", "text.words", "--entrypoint", "grpc"}, 2, `--entrypoint "grpc": want command, http or builtin`, false, ""},
		{[]string{"w5", "--capability", "text.words", "--input-schema", filepath.Join(dir, "none.yaml")}, 2, "none.yaml", false, ""},
	} {
		code, out, _ := capflow(t, append(append([]string{"tools", "scaffold"}, c.args...), "--project", dir, "--output", "json")...)
		env := envelopeOf(t, out)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, c.code, out)
			continue
		}
		if code != 0 {
			said := env.Message
			for _, f := range env.Feedback {
				said += "\n" + f.Message
			}
			if !strings.Contains(said, c.want) || len(env.Feedback) == 0 {
				t.Errorf("%v: %s, want %q", c.args, out, c.want)
			}
			continue
		}
		folder := filepath.Join(dir, "tools", c.args[0])
		manifest, _ := os.ReadFile(filepath.Join(folder, "tool.yaml"))
		_, err := os.Stat(filepath.Join(folder, "run.sh"))
		if !strings.Contains(string(manifest), c.want) || (err == nil) != c.runSh || (c.schema != "" && !strings.Contains(string(manifest), c.schema+":")) {
			t.Errorf("%v: run.sh %v, tool.yaml:\n%s", c.args, err, manifest)
		}
	}
	if code, out, _ := capflow(t, "tools", "validate", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("the scaffolded tools do not validate: %s", out)
	}
	code, out, _ := capflow(t, "tools", "run", "report", "--input", "template=hi {{.who}}", "--input", `values={"who":"you"}`, "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 0 || !strings.Contains(out, `"text":"hi you"`) || env.ToolID != "report" {
		t.Fatalf("the builtin tool does not run: %s", out)
	}
}

// A step whose inputs its capability's tool cannot take is the plan's to
// fix: following the advice must not scaffold a stub that takes the
// capability from a kit's working tool for every plan of the project
// (found by a new user: file.write served by a no-op stub, and plan
// check then said ready).
func TestScaffoldLeavesAProvidedCapability(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	os.WriteFile(plan, []byte("name: mismatch\nsteps:\n  - {id: a, capability: text.render, with: {template: hello}}\n  - id: b\n    capability: file.write\n    with: {path: out.txt, content: \"${steps.a.data.bytes}\"}\n"), 0o644)
	gaps := filepath.Join(dir, "gaps.json")
	code, out, _ := capflow(t, "plan", "check", plan, "--project", dir, "--output-path", gaps)
	if code != 3 || strings.Contains(out, "proposed tool:") ||
		!strings.Contains(out, "fix: the step's inputs, or what feeds them, to fit its tool; a tool of its own, file-write-b, would serve file.write to every plan of the project in place of it (capflow tools scaffold --from-gaps "+gaps+" --step b --alongside)") {
		t.Fatalf("plan check: exit %d\n%s", code, out)
	}
	code, out, _ = capflow(t, "tools", "scaffold", "--from-gaps", gaps, "--project", dir, "--output", "json")
	env := envelopeOf(t, out)
	if code != 0 || env.Message != "no gaps that a new tool can fill (1 gap left to its plan: see the warning)" || len(env.Feedback) != 1 ||
		env.Feedback[0].Message != "step b ("+plan+":4) is left to its plan: file-write@1.0.0 cannot take this step's inputs: with.content: ${steps.a.data.bytes}: type mismatch: the producer gives integer, the consumer needs string; fix the step's inputs or what feeds them, or give it a tool of its own (--from-gaps "+gaps+" --step b --alongside), which would then serve file.write to every plan of the project in place of file-write@1.0.0 (kit:core)" {
		t.Fatalf("scaffold --from-gaps: exit %d %s", code, out)
	}
	code, out, _ = capflow(t, "tools", "scaffold", "my-write", "--capability", "file.write", "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 2 || env.Message != "file.write is already provided by file-write@1.0.0 (kit:core): a new tool would serve it to every plan of the project wherever it ranks first (capflow tools resolve file.write shows the order); fix the plan's step instead, or pass --alongside to create it anyway" {
		t.Fatalf("scaffold a kit's capability: exit %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "tools")); !os.IsNotExist(err) {
		t.Fatalf("a tool was written: %v", err)
	}
	if code, _, _ = capflow(t, "plan", "check", plan, "--project", dir); code != 3 {
		t.Fatalf("the gap was filled by a stub: exit %d", code)
	}
	// Told to, it does, and the stub then comes first: what the flag says.
	code, out, _ = capflow(t, "tools", "scaffold", "--from-gaps", gaps, "--step", "b", "--alongside", "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 0 || len(env.Feedback) != 2 || env.Feedback[0].Message != "file-write-b joins file-write@1.0.0 (kit:core) as a provider of file.write: capflow tools resolve file.write shows which one every plan of the project now gets" {
		t.Fatalf("--alongside: exit %d %s", code, out)
	}
	code, out, _ = capflow(t, "tools", "resolve", "file.write", "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 0 || !strings.HasPrefix(env.Message, "file.write → file-write-b@0.1.0 (project)") {
		t.Fatalf("resolve after --alongside: exit %d %s", code, out)
	}
}

// A sub-plan step's gap has no capability and no tool to scaffold: it is
// left to its plan, where it used to fail the whole scaffold.
func TestScaffoldLeavesASubPlansGap(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "parts"), 0o755)
	os.WriteFile(filepath.Join(dir, "parts", "sub.yaml"), []byte("name: sub\ninputs: {n: {type: string}}\nsteps:\n  - {id: r, capability: text.render, with: {template: \"${inputs.n}\"}}\n"), 0o644)
	plan := filepath.Join(dir, "parent.yaml")
	os.WriteFile(plan, []byte("name: parent\nsteps:\n  - {id: a, capability: text.render, with: {template: hello}}\n  - {id: s, plan: parts/sub.yaml, with: {n: \"${steps.a.data.bytes}\"}}\n"), 0o644)
	gaps := filepath.Join(dir, "gaps.json")
	code, out, _ := capflow(t, "plan", "check", plan, "--project", dir, "--output-path", gaps)
	if code != 3 || !strings.Contains(out, "fix: the step's inputs, or what feeds them, to fit the sub-plan's inputs") {
		t.Fatalf("plan check: exit %d\n%s", code, out)
	}
	for _, flags := range [][]string{nil, {"--alongside"}} {
		code, out, _ = capflow(t, append([]string{"tools", "scaffold", "--from-gaps", gaps, "--project", dir, "--output", "json"}, flags...)...)
		env := envelopeOf(t, out)
		if code != 0 || len(env.Feedback) != 1 || env.Feedback[0].Message != "step s ("+plan+":4) is left to its plan: sub-plan parts/sub.yaml cannot take this step's inputs: with.n: ${steps.a.data.bytes}: type mismatch: the producer gives integer, the consumer needs string; fix the step's inputs, what feeds them, or the sub-plan's inputs" {
			t.Fatalf("scaffold %v: exit %d %s", flags, code, out)
		}
	}
}

// What --from-gaps makes of each kind of gap, what --step, --force and
// --dir change, and that pretty output shows the gaps it left.
func TestScaffoldFromGapsCases(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	os.WriteFile(plan, []byte(`name: mixed
steps:
  - {id: a, capability: text.render, with: {template: hello}}
  - {id: b, capability: file.write, with: {path: out.txt, content: "${steps.a.data.bytes}"}}
  - {id: v, capability: video.transcode, with: {file: x.webm}}
  - {id: p, capability: file.write, tool: fancy-write, with: {path: p.txt, content: x}}
`), 0o644)
	gaps := filepath.Join(dir, "gaps.json")
	code, out, _ := capflow(t, "plan", "check", plan, "--project", dir, "--output-path", gaps)
	if code != 3 || !strings.Contains(out, "fix or drop the step's pin (tool: fancy-write), or give the project a tool of that name") || !strings.Contains(out, "proposed tool: video-transcode (") {
		t.Fatalf("plan check: exit %d\n%s", code, out)
	}
	code, out, _ = capflow(t, "tools", "scaffold", "--from-gaps", gaps, "--project", dir)
	if code != 0 || !strings.Contains(out, "✓ created 1 tool\n  video-transcode (video.transcode) in tools/video-transcode\n") ||
		!strings.Contains(out, "  [warning] step b ("+plan+":4) is left to its plan: file-write@1.0.0 cannot take") ||
		!strings.Contains(out, "  [warning] step p ("+plan+":6) is left to its plan: pinned tool fancy-write does not provide file.write (providers: file-write@1.0.0); fix or drop its pin (tool: fancy-write), or scaffold a tool of that name") {
		t.Fatalf("scaffold, pretty: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--from-gaps", gaps, "--step", "v"}, 2, "already exists (use --force to overwrite)"},
		{[]string{"--from-gaps", gaps, "--step", "v", "--force"}, 0, "created 1 tool"}, // its own folder is no other provider
		{[]string{"--from-gaps", gaps, "--step", "zz"}, 2, "--step zz: " + gaps + " has no gap of that step"},
		{[]string{"another", "--capability", "video.transcode"}, 2, "video.transcode is already provided by video-transcode@0.1.0 (project)"},
		{[]string{"another", "--capability", "video.transcode", "--step", "v"}, 2, "--step goes with --from-gaps"},
		{[]string{"another", "--capability", "video.transcode", "--dir", filepath.Join(dir, "elsewhere")}, 0, "created 1 tool"}, // no project finds it there
	} {
		code, out, _ := capflow(t, append(append([]string{"tools", "scaffold"}, c.args...), "--project", dir, "--output", "json")...)
		if env := envelopeOf(t, out); code != c.code || !strings.Contains(env.Message, c.want) {
			t.Errorf("%v: exit %d %s, want %d %q", c.args, code, env.Message, c.code, c.want)
		}
	}
	// Another provider since the report: the gap is the plan's to check again.
	os.WriteFile(filepath.Join(dir, "capflow.yaml"), []byte("tools_dirs: [tools, more]\n"), 0o644)
	if code, out, _ = capflow(t, "tools", "scaffold", "transcoder", "--capability", "video.transcode", "--dir", filepath.Join(dir, "more"), "--alongside", "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("a second provider: %s", out)
	}
	os.RemoveAll(filepath.Join(dir, "tools", "video-transcode"))
	code, out, _ = capflow(t, "tools", "scaffold", "--from-gaps", gaps, "--step", "v", "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 0 || len(env.Feedback) != 1 || env.Feedback[0].Message != "step v ("+plan+":5) is left to its plan: transcoder@0.1.0 (project) provides video.transcode now; check the plan again" {
		t.Fatalf("a stale report: exit %d %s", code, out)
	}
}

// The commands a scaffold suggests next name the project it was given,
// quoted as one word; without --project they need none.
func TestScaffoldSuggestsTheSameProject(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my tools")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, _ := capflow(t, "tools", "scaffold", "pdf-merge", "--capability", "pdf.merge", "--project", dir)
	want := "`capflow tools validate --project '" + dir + "'` and `capflow tools run NAME --input k=v --project '" + dir + "'`"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want %s in:\n%s", code, want, out)
	}
	for s, q := range map[string]string{"/a/b-c_1.d": "/a/b-c_1.d", "it's": `'it'\''s'`, "": "''", "$(x)": "'$(x)'"} {
		if got := shellQuote(s); got != q {
			t.Errorf("shellQuote(%q) = %s, want %s", s, got, q)
		}
	}
}

// A tool whose manifest is broken is not a missing tool: tools show prints
// its problems at their lines, and tools list names the file it left out
// (a new user was told "no tool named" it).
func TestABrokenToolIsNotAMissingOne(t *testing.T) {
	dir := t.TempDir()
	yaml, raw := scaffolded(t, dir, "pdf-merge", "pdf.merge")
	os.WriteFile(yaml, append(raw, []byte("\ntimeouts: {start_to_close: 300}\n")...), 0o644)
	code, out, _ := capflow(t, "tools", "show", "pdf-merge", "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 2 || env.Error == nil || !strings.Contains(env.Message, "tool.yaml") || strings.Contains(env.Message, "no tool") {
		t.Fatalf("broken manifest: exit %d, %s", code, env.Message)
	}
	// tools list names the file it left out.
	_, out, _ = capflow(t, "tools", "list", "--project", dir, "--output", "json")
	if all, _ := json.Marshal(envelopeOf(t, out).Feedback); !strings.Contains(string(all), "pdf-merge/tool.yaml, left out") {
		t.Fatalf("tools list: %s", all)
	}
	// A plan that needs it is told to mend that file, and a scaffold from
	// its gaps leaves it (a trial was offered a second tool beside it).
	plan, gaps := filepath.Join(dir, "plan.yaml"), filepath.Join(dir, "gaps.json")
	os.WriteFile(plan, []byte("name: merge\nsteps:\n  - {id: m, capability: pdf.merge, with: {files: [a.pdf]}}\n"), 0o644)
	code, out, _ = capflow(t, "plan", "check", plan, "--project", dir, "--output-path", gaps)
	if code != 3 || !strings.Contains(out, "no tool provides pdf.merge: tools/pdf-merge/tool.yaml declares it but is left out for its problems") ||
		!strings.Contains(out, "      fix: tools/pdf-merge/tool.yaml (capflow tools validate names its problems), not a new tool\n") {
		t.Fatalf("plan check: exit %d\n%s", code, out)
	}
	code, out, _ = capflow(t, "tools", "scaffold", "--from-gaps", gaps, "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 0 || len(env.Feedback) != 1 || env.Feedback[0].Message != "step m ("+plan+":3) is left to its plan: tools/pdf-merge/tool.yaml declares pdf.merge but is left out for its problems; fix it (capflow tools validate names them), or pass --alongside for a second tool" {
		t.Fatalf("scaffold from its gaps: exit %d %s", code, out)
	}
}

// A step fed what an earlier step's tool does not promise (a field its
// output_schema leaves optional) is told to fix that, not offered a tool
// of its own in place of a core one (this round's new-user trial).
func TestAnUnpromisedFieldNamesItsProducer(t *testing.T) {
	dir := t.TempDir()
	yaml, raw := scaffolded(t, dir, "tok-maker", "tok.make")
	i := strings.Index(string(raw), "output_schema:")
	j := strings.Index(string(raw)[i:], "\nentrypoint:")
	if i < 0 || j < 0 {
		t.Fatalf("scaffolded manifest:\n%s", raw)
	}
	out := "output_schema:\n  type: object\n  properties:\n    tok: {type: string}\n"
	os.WriteFile(yaml, []byte(string(raw)[:i]+out+string(raw)[i+j+1:]), 0o644)
	plan := filepath.Join(dir, "plan.yaml")
	os.WriteFile(plan, []byte("name: p\nsteps:\n  - {id: s, capability: tok.make}\n  - {id: w, capability: file.write, with: {path: t.txt, content: \"${steps.s.data.tok}\"}}\n"), 0o644)
	code, got, _ := capflow(t, "plan", "check", plan, "--project", dir)
	if code != 3 || !strings.Contains(got, "      fix: what the step takes from s (tok-maker@0.1.0), or that tool's output_schema (require the field, give it a type); a tool of its own would be given the same\n") {
		t.Fatalf("plan check: exit %d\n%s", code, got)
	}
}

// scaffolded scaffolds a tool in the project dir: its manifest's path and
// text.
func scaffolded(t *testing.T, dir, name, capability string) (string, []byte) {
	t.Helper()
	if code, out, _ := capflow(t, "tools", "scaffold", name, "--capability", capability, "--project", dir); code != 0 {
		t.Fatalf("scaffold %s: exit %d\n%s", name, code, out)
	}
	yaml := filepath.Join(dir, "tools", name, "tool.yaml")
	raw, err := os.ReadFile(yaml)
	if err != nil {
		t.Fatal(err)
	}
	return yaml, raw
}
