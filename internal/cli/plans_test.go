package cli

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/examples"
)

// expectation reads the "# expect: check=STATUS" line of an example.
func expectation(t *testing.T, file string) string {
	t.Helper()
	check, _, err := examples.Expect(file)
	if err != nil || check == "" {
		t.Fatalf("%s has no '# expect: check=' line (%v)", file, err)
	}
	return check
}

func TestExamplesGiveTheirPromisedStatus(t *testing.T) {
	root := repoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "plans/examples/*.yaml"))
	if len(files) < 6 {
		t.Fatalf("want at least 6 examples, have %d", len(files))
	}
	exits := map[string]int{"ready": 0, "invalid": 2, "partial-complete": 3, "blocked_by_policy": 4}
	seen := map[string]bool{}
	for _, f := range files {
		want := expectation(t, f)
		if examples.NeedsFFmpeg(f) {
			if _, err := exec.LookPath("ffmpeg"); err == nil {
				want = "ready"
			}
		}
		seen[want] = true
		t.Run(filepath.Base(f), func(t *testing.T) {
			code, out, _ := capflow(t, "plan", "check", f, "--project", root, "--output", "json")
			env := envelopeOf(t, out)
			status := env.Data.(map[string]any)["status"]
			if status != want || code != exits[want] {
				t.Fatalf("status %v exit %d, want %s exit %d: %s", status, code, want, exits[want], env.Message)
			}
		})
	}
	for _, s := range []string{"ready", "partial-complete", "blocked_by_policy"} {
		if !seen[s] {
			t.Errorf("no example shows %s", s)
		}
	}
}

func TestPlanCheckData(t *testing.T) {
	root := repoRoot(t)
	code, out, _ := capflow(t, "plan", "check", filepath.Join(root, "plans/examples/file-pipeline.yaml"), "--project", root, "--output", "json")
	env := envelopeOf(t, out)
	d := env.Data.(map[string]any)
	res := d["resolution"].([]any)
	first := res[0].(map[string]any)
	if code != 0 || len(res) != 4 || first["step_id"] != "list" || first["tool"] != "file-list" || !strings.HasPrefix(first["digest"].(string), "sha256:") || first["version"] != "1.0.0" {
		t.Fatalf("resolution: %v", res)
	}
	if d["policy"].(map[string]any)["allowed"] != true || len(d["gaps"].([]any)) != 0 {
		t.Fatalf("policy/gaps: %v", d)
	}

	code, out, _ = capflow(t, "plan", "check", filepath.Join(root, "plans/examples/media-to-drive.yaml"), "--project", root, "--output", "json", "--input", "url=https://youtu.be/x")
	env = envelopeOf(t, out)
	gaps := env.Data.(map[string]any)["gaps"].([]any)
	g := gaps[0].(map[string]any)
	if code != 3 || env.Error.Code != "TOOL_NOT_FOUND" || len(gaps) != 2 || g["reason"] != "no_capability_match" || g["proposed_tool_name"] != "youtube-download" || g["priority"] != "high" {
		t.Fatalf("gaps: %s", out)
	}
	// Inputs are checked when given.
	code, out, _ = capflow(t, "plan", "check", filepath.Join(root, "plans/examples/media-to-drive.yaml"), "--project", root, "--output", "json", "--input", "ulr=x")
	if env = envelopeOf(t, out); code != 2 || !strings.Contains(env.Message, `unknown input "ulr"`) {
		t.Fatalf("bad inputs: exit %d %s", code, env.Message)
	}
}

func TestBrokenPlans(t *testing.T) {
	root := repoRoot(t)
	tests := map[string]string{
		"cycle.yaml":     "dependency cycle: a → b → c → a",
		"dangling.yaml":  `no step "nope"`,
		"duplicate.yaml": `duplicate step id "a"`,
		"types.yaml":     "must be integer, not string",
		"badyaml.yaml":   "invalid YAML",
		// Literal programs, parsed by the CLI before a run.
		"badquery.yaml":    `query ".a[] | select(. > 1": unexpected EOF`,
		"badtemplate.yaml": `template: text:1: function "nosuchfunc" not defined`,
	}
	for file, want := range tests {
		t.Run(file, func(t *testing.T) {
			code, out, _ := capflow(t, "plan", "check", filepath.Join(root, "testdata/plans", file), "--project", root, "--output", "json")
			env := envelopeOf(t, out)
			if code != 2 || env.Data.(map[string]any)["status"] != "invalid" {
				t.Fatalf("exit %d: %s", code, out)
			}
			found := false
			for _, p := range env.Data.(map[string]any)["problems"].([]any) {
				pm := p.(map[string]any)
				line, _ := pm["line"].(float64)
				if strings.Contains(pm["message"].(string), want) && line > 0 && strings.HasSuffix(pm["file"].(string), file) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no problem %q with file and line: %s", want, out)
			}
		})
	}
}

func TestGapsToScaffoldToReady(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	plan := filepath.Join(root, "plans/examples/media-to-drive.yaml")
	report := filepath.Join(dir, "gaps.json")
	if code, _, _ := capflow(t, "plan", "check", plan, "--project", dir, "--output-path", report); code != 3 {
		t.Fatalf("want partial-complete first, exit %d", code)
	}
	if code, out, _ := capflow(t, "tools", "scaffold", "--from-gaps", report, "--project", dir, "--output", "json"); code != 0 {
		t.Fatalf("scaffold: %s", out)
	}
	code, out, _ := capflow(t, "plan", "check", plan, "--project", dir, "--input", "url=https://youtu.be/x", "--output", "json")
	if env := envelopeOf(t, out); code != 0 || env.Data.(map[string]any)["status"] != "ready" {
		t.Fatalf("after scaffolding: exit %d %s", code, env.Message)
	}
}

func TestPlanGraph(t *testing.T) {
	root := repoRoot(t)
	code, out, _ := capflow(t, "plan", "graph", filepath.Join(root, "plans/examples/quorum-checksums.yaml"), "--project", root)
	if code != 0 || !strings.HasPrefix(out, "flowchart TD\n") || !strings.Contains(out, "join: quorum ≥2/3") || !strings.Contains(out, "→ file-checksum@1.0.0") {
		t.Fatalf("mermaid:\n%s", out)
	}
	code, out, _ = capflow(t, "plan", "graph", filepath.Join(root, "plans/examples/media-to-drive.yaml"), "--project", root, "--format", "dot")
	if code != 0 || !strings.Contains(out, `"download" -> "upload";`) || !strings.Contains(out, "gap: no_capability_match") {
		t.Fatalf("dot:\n%s", out)
	}
	if code, _, _ = capflow(t, "plan", "graph", "x.yaml", "--format", "png"); code != 2 {
		t.Fatalf("bad format: exit %d", code)
	}
}

// Found in review: a parent could run through a sub-plan what its policy
// forbids; a sub-plan may not leave the project through a link either.
func TestSubPlanChecks(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "parts"), 0o755)
	os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte("deny: [\"http.*\"]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "parts", "get.yaml"), []byte("name: get\ninputs: {url: {type: string, pattern: \"^https?://\"}}\noutputs: {status: \"${steps.get.data.status}\"}\nsteps:\n  - {id: get, capability: http.request, with: {url: \"${inputs.url}\"}}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "parent.yaml"), []byte("name: parent\nsteps:\n  - {id: fetch, plan: parts/get.yaml, with: {url: \"http://127.0.0.1:1\"}}\n"), 0o644)
	code, out, _ := capflow(t, "plan", "check", filepath.Join(dir, "parent.yaml"), "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 4 || !strings.Contains(env.Message, "fetch/get") {
		t.Fatalf("policy through a sub-plan: exit %d %s", code, env.Message)
	}
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x.yaml"), []byte("name: x\nsteps: [{id: a, capability: file.list, with: {dir: .}}]\n"), 0o644)
	os.Symlink(filepath.Join(outside, "x.yaml"), filepath.Join(dir, "parts", "link.yaml"))
	os.WriteFile(filepath.Join(dir, "linked.yaml"), []byte("name: linked\nsteps:\n  - {id: x, plan: parts/link.yaml}\n"), 0o644)
	code, out, _ = capflow(t, "plan", "check", filepath.Join(dir, "linked.yaml"), "--project", dir, "--output", "json")
	if code != 2 || !strings.Contains(out, "leads outside the project") {
		t.Fatalf("sub-plan through a link: exit %d %s", code, out)
	}
}

// TestProjectFoundFromASubfolder: without --project, a command uses the
// nearest capflow.yaml above the current folder; with none, it says in one
// line that the defaults are used.
func TestProjectFoundFromASubfolder(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "capflow.yaml"), []byte("active_kits: [core, runtime]\n"), 0o644)
	sub := filepath.Join(root, "plans", "examples")
	os.MkdirAll(sub, 0o755)
	t.Chdir(sub)
	code, out, errb := capflow(t, "tools", "resolve", "server.start", "--output", "json")
	if code != 0 || strings.Contains(errb, "defaults are used") {
		t.Fatalf("from a subfolder: exit %d\n%s\n%s", code, out, errb)
	}
	bare := t.TempDir()
	t.Chdir(bare)
	code, _, errb = capflow(t, "tools", "resolve", "server.start", "--output", "json")
	if code == 0 || strings.Count(errb, "no capflow.yaml in "+bare+" or above: the defaults are used") != 1 {
		t.Fatalf("with no capflow.yaml: exit %d\n%s", code, errb)
	}
}

// TestScaffoldHintNamesTheReport: the gap hint names the report the user
// wrote with --output-path, or says how to write one.
func TestScaffoldHintNamesTheReport(t *testing.T) {
	if h := scaffoldHint("gaps.json"); h != "capflow tools scaffold --from-gaps gaps.json" {
		t.Fatal(h)
	}
	if h := scaffoldHint(""); !strings.Contains(h, "add --output-path REPORT.json") {
		t.Fatal(h)
	}
}

// TestMisspelledKitIsAConfigError: plan check of a project whose
// active_kits names a kit that is not there says so, positioned, with a
// suggestion: not "no tool provides text.render".
func TestMisspelledKitIsAConfigError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "capflow.yaml"), []byte("active_kits: [cor, runtime]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("name: p\nsteps:\n  - {id: a, capability: text.render, with: {template: hi}}\n"), 0o644)
	code, out, _ := capflow(t, "plan", "check", filepath.Join(dir, "p.yaml"), "--project", dir, "--output", "json")
	env := envelopeOf(t, out)
	if code != 2 || env.Error == nil || env.Error.Code != "CONFIG_ERROR" || !strings.Contains(out, `capflow.yaml:1:15: active_kits: active kit \"cor\" not found`) || !strings.Contains(out, `did you mean \"core\"?`) {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// run of a plan whose request inputs are missing or wrong starts nothing:
// exit 2 before any server is dialled (the address is unreachable).
func TestRunRefusesBadInputsBeforeStarting(t *testing.T) {
	root := repoRoot(t)
	plan := filepath.Join(root, "plans/examples/media-to-drive.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, `missing required input "url"`},
		{[]string{"--input", "ulr=x", "--input", "url=https://youtu.be/x"}, `unknown input "ulr" (did you mean "url"?)`},
	} {
		args := append([]string{"run", plan, "--project", root, "--output", "json", "--address", "127.0.0.1:1"}, c.args...)
		code, out, _ := capflow(t, args...)
		env := envelopeOf(t, out)
		if code != 2 || env.Error == nil || env.Error.Code != "INVALID_INPUT" || !strings.Contains(env.Message, c.want) {
			t.Errorf("%v: exit %d %s", c.args, code, out)
		}
	}
}

// agent's phases are in its envelope, not only on stderr.
func TestAgentPhasesInTheEnvelope(t *testing.T) {
	root := repoRoot(t)
	code, out, _ := capflow(t, "agent", "скачай с яндекс диска https://disk.yandex.ru/d/abc", "--dry-run", "--project", root, "--output", "json")
	env := envelopeOf(t, out)
	var phases []string
	for _, f := range env.Feedback {
		phases = append(phases, f.Phase)
	}
	if code != 0 || strings.Join(phases, ",") != "planning,gap check,policy check,preview" {
		t.Fatalf("exit %d, phases %v\n%s", code, phases, out)
	}
}

// TestGapsSayWhereTheStepIs: a gap names the file and line of its step,
// a sub-plan's step in the sub-plan's file, in the envelope and in the
// pretty report.
func TestGapsSayWhereTheStepIs(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "parts"), 0o755)
	os.WriteFile(filepath.Join(dir, "parts", "sub.yaml"), []byte("name: sub\nsteps:\n  - id: ok\n    capability: text.render\n    with: {template: x}\n  - id: lost\n    capability: audio.nowhere\n"), 0o644)
	main := filepath.Join(dir, "main.yaml")
	os.WriteFile(main, []byte("name: main\nsteps:\n  - id: a\n    capability: text.render\n    with: {template: x}\n  - id: b\n    capability: video.nowhere\n    needs: [a]\n  - {id: s, plan: parts/sub.yaml}\n"), 0o644)
	code, out, _ := capflow(t, "plan", "check", main, "--project", dir, "--output", "json")
	if code != 3 {
		t.Fatalf("exit %d, want 3: %s", code, out)
	}
	where := map[string]string{}
	for _, g := range envelopeOf(t, out).Data.(map[string]any)["gaps"].([]any) {
		m := g.(map[string]any)
		where[m["step_id"].(string)] = fmt.Sprintf("%v:%v", m["file"], m["line"])
	}
	// A sub-plan is named as the parent names it, in the project.
	want := map[string]string{"b": main + ":6", "s/lost": "parts/sub.yaml:6"}
	if !maps.Equal(where, want) {
		t.Fatalf("gaps at %v, want %v", where, want)
	}
	_, pretty, _ := capflow(t, "plan", "check", main, "--project", dir)
	if !strings.Contains(pretty, "✗ b at "+main+":6 [no_capability_match") {
		t.Fatalf("pretty report does not place the gap:\n%s", pretty)
	}
}

// capflow run refuses a plan with a gap as plan check does, and says that
// nothing was started (a new user read the check's words and wondered).
func TestRunOfAGapPlanSaysNothingStarted(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "gap.yaml")
	os.WriteFile(plan, []byte("name: gap\nsteps:\n  - {id: a, capability: nothing.provides_this}\n"), 0o644)
	code, out, _ := capflow(t, "run", plan, "--project", dir, "--output", "json")
	if env := envelopeOf(t, out); code != 3 || !strings.HasSuffix(env.Message, "(nothing was started)") {
		t.Fatalf("exit %d: %s", code, env.Message)
	}
	code, human, _ := capflow(t, "run", plan, "--project", dir)
	if code != 3 || !strings.Contains(human, "nothing was started") {
		t.Fatalf("exit %d:\n%s", code, human)
	}
}

// A tool's secret that is not set where the plan is checked is noted (a
// trial's step ran without it, and nothing said so); one that is set is
// not.
func TestAnUnsetSecretIsNoted(t *testing.T) {
	dir := t.TempDir()
	yaml, raw := scaffolded(t, dir, "needs-token", "token.use")
	os.WriteFile(yaml, append(raw, []byte("\nsecrets: [CAPFLOW_TEST_SET_TOKEN, CAPFLOW_TEST_UNSET_TOKEN]\n")...), 0o644)
	t.Setenv("CAPFLOW_TEST_SET_TOKEN", "x")
	plan := filepath.Join(dir, "plan.yaml")
	os.WriteFile(plan, []byte("name: p\nsteps:\n  - {id: use, capability: token.use}\n"), 0o644)
	code, out, _ := capflow(t, "plan", "check", plan, "--project", dir)
	want := "step use: needs-token@0.1.0's secret CAPFLOW_TEST_UNSET_TOKEN is not set in this environment; the tool runs without it unless the worker's has it (a dependency {kind: env, name: NAME} makes it required)"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want the note %q in:\n%s", code, want, out)
	}
	// One it also names as an env dependency is required: a gap, no note.
	os.WriteFile(yaml, append(raw, []byte("\nsecrets: [CAPFLOW_TEST_UNSET_TOKEN]\ndependencies: [{kind: env, name: CAPFLOW_TEST_UNSET_TOKEN}]\n")...), 0o644)
	code, out, _ = capflow(t, "plan", "check", plan, "--project", dir)
	if code != 3 || strings.Contains(out, "is not set in this environment") || !strings.Contains(out, "environment variable CAPFLOW_TEST_UNSET_TOKEN is not set") {
		t.Fatalf("a required secret: exit %d\n%s", code, out)
	}
}
