package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/envelope"
)

// capflow runs the CLI in-process and returns exit code, stdout, stderr.
func capflow(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// envelopeOf parses stdout, which must hold exactly one envelope.
func envelopeOf(t *testing.T, stdout string) envelope.Envelope {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var env envelope.Envelope
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("stdout is not an envelope: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", stdout)
	}
	if errs := envelope.Validate(&env); len(errs) > 0 {
		t.Fatalf("invalid envelope %v:\n%s", errs, stdout)
	}
	return env
}

func repoRoot(t *testing.T) string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

func TestValidateRepoIsClean(t *testing.T) {
	code, out, _ := capflow(t, "tools", "validate", "--project", repoRoot(t), "--output", "json")
	env := envelopeOf(t, out)
	if code != 0 || !env.Success {
		t.Fatalf("repo manifests invalid (exit %d): %s", code, out)
	}
	tools := env.Data.(map[string]any)["tools"].([]any)
	if len(tools) < 11 {
		t.Fatalf("want core (9) + media (2) tools, got %d", len(tools))
	}
}

func TestValidateBrokenManifests(t *testing.T) {
	code, out, _ := capflow(t, "tools", "validate", "--project", filepath.Join(repoRoot(t), "testdata", "broken"), "--output", "json")
	if code != 2 {
		t.Fatalf("exit = %d, want 2", code)
	}
	env := envelopeOf(t, out)
	if env.Success || env.Error.Code != "INVALID_INPUT" {
		t.Fatalf("%+v", env)
	}
	var probs []string
	for _, p := range env.Data.(map[string]any)["problems"].([]any) {
		m := p.(map[string]any)
		probs = append(probs, strings.Join([]string{m["file"].(string), itoa(m["line"]), m["field"].(string), m["message"].(string)}, "|"))
	}
	all := strings.Join(probs, "\n")
	for _, want := range []string{
		"tools/a/tool.yaml|4||invalid YAML",
		"tools/b/tool.yaml|1|description|missing required field",
		"tools/b/tool.yaml|2|version|must be string",
		"tools/b/tool.yaml|3|capabilities[0]|is not domain.action",
		"tools/b/tool.yaml|4|entrypoint.type|must be one of command, http, builtin, mcp",
		"tools/c/tool.yaml|4|capabilites|did you mean \"capabilities\"",
		"tools/c/tool.yaml|7|input_schema.type|not a valid JSON Schema",
		"tools/c/tool.yaml|8|priority|must be integer",
		"tools/e/tool.yaml|1|name|duplicate tool name \"d\"",
	} {
		parts := strings.SplitN(want, "|", 4)
		found := false
		for _, p := range probs {
			if strings.HasPrefix(p, strings.Join(parts[:3], "|")+"|") && strings.Contains(p, parts[3]) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing problem %q in:\n%s", want, all)
		}
	}
	// Pretty output quotes the line and never shows a Go stack trace.
	code, pretty, stderr := capflow(t, "tools", "validate", "--project", filepath.Join(repoRoot(t), "testdata", "broken"))
	if code != 2 || !strings.Contains(pretty, "4 | capabilites: [a.b]") || strings.Contains(pretty+stderr, "goroutine") {
		t.Fatalf("pretty output:\n%s\n%s", pretty, stderr)
	}
}

func itoa(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestResolveExplains(t *testing.T) {
	code, out, _ := capflow(t, "tools", "resolve", "file.checksum", "--project", repoRoot(t), "--output", "json")
	env := envelopeOf(t, out)
	d := env.Data.(map[string]any)
	if code != 0 || d["chosen"].(map[string]any)["name"] != "file-checksum" || d["candidates"].([]any)[0].(map[string]any)["reason"] == "" {
		t.Fatalf("%s", out)
	}
	code, out, _ = capflow(t, "tools", "resolve", "video.convrt", "--project", repoRoot(t), "--output", "json")
	env = envelopeOf(t, out)
	if code != 3 || env.Error.Code != "TOOL_NOT_FOUND" || !strings.Contains(env.Message, `did you mean "video.convert"?`) {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestBadInvocations(t *testing.T) {
	for _, args := range [][]string{
		{"tools", "bogus"}, {"nope"}, {"tools", "resolve"}, {"tools", "list", "--output", "yaml"},
		{"tools", "scaffold", "Bad_Name", "--capability", "a.b"}, {"tools", "run", "x", "--input", "novalue"},
	} {
		code, out, stderr := capflow(t, append(args, "--output", "json", "--project", t.TempDir())...)
		if args[len(args)-1] == "yaml" {
			code, out, stderr = capflow(t, args...)
		}
		if code != 2 && !(args[1] == "run" && code == 3) {
			t.Errorf("%v: exit %d, want 2\n%s%s", args, code, out, stderr)
		}
		if strings.Contains(out+stderr, "goroutine ") {
			t.Errorf("%v: stack trace", args)
		}
	}
}

func TestOutputPathAndEnvJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "env.json")
	t.Setenv("TOOLS_OUTPUT_JSON", "1")
	code, out, _ := capflow(t, "tools", "list", "--project", repoRoot(t), "--output-path", p)
	env := envelopeOf(t, out)
	b, err := os.ReadFile(p)
	if code != 0 || err != nil || !strings.Contains(string(b), `"toolId": "capflow-tools-list"`) || env.ToolID != "capflow-tools-list" {
		t.Fatalf("exit %d, err %v, file %s", code, err, b)
	}
}

// --output-path names a regular file in a writable folder, never a link:
// refused before the command runs (exit 2, the envelope says so, the
// link's target untouched).
func TestOutputPathRefusals(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	must(t, os.WriteFile(victim, []byte("precious"), 0o644))
	must(t, os.Symlink(victim, filepath.Join(dir, "link.json")))
	must(t, os.Mkdir(filepath.Join(dir, "ro"), 0o555))
	cases := map[string]string{
		filepath.Join(dir, "link.json"):      "is a symbolic link",
		filepath.Join(dir, "missing", "x"):   "its folder",
		dir:                                  "is not a regular file",
		filepath.Join(dir, "ro", "env.json"): "not writable",
	}
	for p, want := range cases {
		if os.Geteuid() == 0 && strings.HasSuffix(p, "ro/env.json") {
			continue // root writes anywhere
		}
		code, out, _ := capflow(t, "version", "--output", "json", "--output-path", p)
		env := envelopeOf(t, out)
		if code != 2 || env.ExitCode != 2 || !strings.Contains(env.Message, want) || !strings.Contains(env.Message, "--output-path") {
			t.Errorf("%s: exit %d, envelope %d %q", p, code, env.ExitCode, env.Message)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("written through the link: %q", b)
	}
}

// With json output every outcome is one envelope: unknown commands, bare
// groups, help and version included; ids are kebab-case.
func TestEveryOutcomeIsOneEnvelope(t *testing.T) {
	cases := []struct {
		args []string
		code int
		id   string
	}{
		{[]string{"--output", "json", "frobnicate"}, 2, "capflow"},
		{[]string{"--output", "json", "plan"}, 2, "capflow-plan"},
		{[]string{"--output=json", "tools"}, 2, "capflow-tools"},
		{[]string{"--output", "json", "--help"}, 0, "capflow"},
		{[]string{"--help", "--output", "json"}, 0, "capflow"},
		{[]string{"--output", "json", "plan", "check", "--help"}, 0, "capflow-plan-check"},
		{[]string{"--output", "json", "--version"}, 0, "capflow"},
		{[]string{"--output", "json", "version"}, 0, "capflow-version"},
		{[]string{"--output", "json", "tools", "list", "--project", repoRoot(t)}, 0, "capflow-tools-list"},
		{[]string{"--output", "json", "plan", "check", "nope.yaml", "--project", t.TempDir()}, 2, "capflow-plan-check"},
	}
	for _, c := range cases {
		code, out, _ := capflow(t, c.args...)
		env := envelopeOf(t, out)
		if code != c.code || env.ToolID != c.id {
			t.Errorf("%v: exit %d toolId %q, want %d %q\n%s", c.args, code, env.ToolID, c.code, c.id, out)
		}
	}
}

func TestToolsShowAndDescription(t *testing.T) {
	code, out, _ := capflow(t, "tools", "show", "file-checksum", "--project", t.TempDir(), "--output", "json")
	env := envelopeOf(t, out)
	var d struct {
		Manifest    map[string]any `json:"manifest"`
		Description string         `json:"description_md"`
		Digest      string         `json:"digest"`
		Runs        string         `json:"runs"`
		Source      string         `json:"source"`
	}
	b, _ := json.Marshal(env.Data)
	json.Unmarshal(b, &d)
	if code != 0 || d.Manifest["input_schema"] == nil || !strings.Contains(d.Description, "SHA-256") || !strings.HasPrefix(d.Digest, "sha256:") || d.Runs != "builtin: file.checksum" || d.Source != "kit:core" {
		t.Fatalf("tools show: exit %d %+v", code, d)
	}
	// A scaffolded tool has a description.md, shown with it.
	dir := t.TempDir()
	capflow(t, "tools", "scaffold", "pdf-merge", "--capability", "pdf.merge", "--project", dir)
	_, out, _ = capflow(t, "tools", "show", "pdf.merge", "--project", dir, "--output", "json")
	b, _ = json.Marshal(envelopeOf(t, out).Data)
	json.Unmarshal(b, &d)
	if !strings.Contains(d.Description, "# pdf-merge") || !strings.HasPrefix(d.Runs, "command: ./run.sh") {
		t.Fatalf("scaffolded tool: %+v", d)
	}
	if code, _, _ := capflow(t, "tools", "show", "nope", "--project", dir, "--output", "json"); code != 3 {
		t.Fatalf("unknown tool: exit %d, want 3", code)
	}
}

func TestToolsRunExitsByCapflowsTable(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "tools", "four")
	os.MkdirAll(tool, 0o755)
	os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte("name: four\nversion: 1.0.0\ndescription: exits 4\ncapabilities: [test.four]\nentrypoint: {type: command, command: [./run.sh], result: exit_code}\n"), 0o644)
	os.WriteFile(filepath.Join(tool, "run.sh"), []byte("#!/bin/sh\nexit 4\n"), 0o755)
	code, out, _ := capflow(t, "tools", "run", "four", "--project", dir, "--output", "json")
	env := envelopeOf(t, out)
	if code != 1 || env.ExitCode != 4 || env.Error.Code != "TOOL_FAILURE" {
		t.Fatalf("a tool exiting 4: capflow exit %d (want 1), envelope exit %d, %+v\n%s", code, env.ExitCode, env.Error, out)
	}
}

// A command given too few arguments says which, by its usage line; the
// version reads the same both ways it is asked.
func TestArgumentCountNamesTheUsage(t *testing.T) {
	code, out, _ := capflow(t, "status", "--output", "json")
	if env := envelopeOf(t, out); code != 2 || !strings.Contains(env.Message, "capflow status accepts 1 arg(s), received 0 (usage: capflow status ID [flags])") {
		t.Fatalf("exit %d: %s", code, env.Message)
	}
	_, flag, _ := capflow(t, "--version")
	_, word, _ := capflow(t, "version")
	if flag != word || !strings.HasPrefix(flag, "capflow ") {
		t.Fatalf("--version %q, version %q", flag, word)
	}
}

// A person trying a tool sees what it returned, not only "done".
func TestToolsRunShowsItsData(t *testing.T) {
	code, out, _ := capflow(t, "tools", "run", "text-render", "--input", "template=hi", "--project", t.TempDir())
	if code != 0 || !strings.Contains(out, "✓ text-render done\n  bytes: 2\n  text: \"hi\"\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestAgentDryRunListsPlannedOperations(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644)
	code, out, _ := capflow(t, "agent", "what is the sha256 of notes.txt", "--dry-run", "--project", dir, "--output", "json")
	env := envelopeOf(t, out)
	data := env.Data.(map[string]any)
	planned, _ := data["planned"].([]any)
	missing, _ := data["missing"].([]any)
	if code != 0 || len(planned) == 0 || len(missing) != 0 {
		t.Fatalf("dry run: exit %d planned %v missing %v\n%s", code, planned, missing, out)
	}
	op := planned[0].(map[string]any)
	if op["tool"] != "file-checksum@1.0.0" || op["runs"] != "builtin: file.checksum" {
		t.Fatalf("planned operation: %v", op)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Every name a person types gets a "did you mean": subcommands, tools and
// capabilities, plan files.
func TestDidYouMean(t *testing.T) {
	root := repoRoot(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"tools", "lst"}, `(did you mean "list"?)`},
		{[]string{"plann", "check"}, `(did you mean "plan"?)`},
		{[]string{"tools", "show", "file-cheksum", "--project", root}, `(did you mean "file-checksum"?)`},
		{[]string{"tools", "run", "file.cheksum", "--project", root}, `(did you mean "file.checksum"?)`},
		{[]string{"plan", "check", filepath.Join(root, "plans", "exampels", "conditions.yaml"), "--project", root}, `(did you mean "` + filepath.Join(root, "plans", "examples", "conditions.yaml") + `"?)`},
	}
	for _, c := range cases {
		code, out, _ := capflow(t, append(c.args, "--output", "json")...)
		env := envelopeOf(t, out)
		if code == 0 || !strings.Contains(out, strings.ReplaceAll(c.want, `"`, `\"`)) {
			t.Errorf("%v: exit %d %s", c.args, code, env.Message)
		}
	}
}

// tools validate warns of a project tool without description.md, and
// passes.
func TestValidateWarnsWithoutDescription(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "tools", "plain"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "tools", "plain", "tool.yaml"), []byte("name: plain\nversion: 1.0.0\ndescription: plain\ncapabilities: [test.plain]\ninput_schema: {type: object}\noutput_schema: {type: object}\nentrypoint: {type: command, command: [\"true\"]}\n"), 0o644))
	code, out, _ := capflow(t, "tools", "validate", "--project", dir, "--output", "json")
	env := envelopeOf(t, out)
	if code != 0 || len(env.Feedback) == 0 || !strings.Contains(env.Feedback[0].Message, "tools/plain/tool.yaml: no description.md") {
		t.Fatalf("exit %d %+v", code, env.Feedback)
	}
}

// capflow plan test: exit 0 when every case passes, 1 (TEST_FAILURE) with
// the diffs when one fails, 2 for a case file with faults; JUnit on
// request; the case file beside the plan found by itself.
func TestPlanTest(t *testing.T) {
	root := repoRoot(t)
	plan := filepath.Join(root, "plans", "examples", "conditions.yaml")
	junit := filepath.Join(t.TempDir(), "junit.xml")
	code, out, _ := capflow(t, "plan", "test", plan, "--project", root, "--coverage", "--junit", junit, "--output", "json")
	var env struct {
		Success bool
		Message string
		Data    struct {
			Passed, Failed int
			Coverage       struct{ Taken, Total int }
		}
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || code != 0 || !env.Success || env.Data.Passed != 3 || env.Data.Coverage.Total != 14 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if b, err := os.ReadFile(junit); err != nil || !strings.Contains(string(b), `<testsuite name="conditions" tests="3" failures="0"`) {
		t.Fatalf("junit: %v %s", err, b)
	}
	cases := filepath.Join(t.TempDir(), "cases.yaml")
	_ = os.WriteFile(cases, []byte("cases:\n  - name: wrong\n    expect: {status: failed}\n"), 0o644)
	code, out, _ = capflow(t, "plan", "test", plan, "--project", root, "--cases", cases)
	if code != 1 || !strings.Contains(out, "✗ wrong (the run passed") || !strings.Contains(out, "status: expected failed, got passed") {
		t.Fatalf("a failed case: exit %d\n%s", code, out)
	}
	_ = os.WriteFile(cases, []byte("cases:\n  - name: typo\n    steps: {fnd: {data: {}}}\n"), 0o644)
	code, out, _ = capflow(t, "plan", "test", plan, "--project", root, "--cases", cases, "--output", "json")
	if code != 2 || !strings.Contains(out, `the plan has no step \"fnd\" (did you mean \"find\"?)`) || !strings.Contains(out, `"line":3`) {
		t.Fatalf("a bad case file: exit %d\n%s", code, out)
	}
}

// Every envelope, successes and failures, offline commands and those of
// the cache included, has feedback: one entry at least for each phase it
// went through (issue 54: cache ls and purge had none).
func TestEveryEnvelopeHasFeedback(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args   []string
		phases []string
	}{
		{[]string{"cache", "ls"}, []string{"store", "list"}},
		{[]string{"cache", "purge"}, []string{"store", "purge"}},
		{[]string{"cache", "purge", "--older-than", "x"}, []string{"result"}},
		{[]string{"cache", "show", "abcdef"}, []string{"result"}},
		{[]string{"tools", "list"}, []string{"registry"}},
		{[]string{"tools", "run", "nope"}, []string{"result"}},
		{[]string{"tools", "scaffold", "--write-templates"}, []string{"result"}},
		{[]string{"config", "show"}, nil},
	} {
		_, out, _ := capflow(t, append(c.args, "--output", "json", "--project", dir)...)
		env := envelopeOf(t, out)
		got := map[string]bool{}
		for _, f := range env.Feedback {
			got[f.Phase] = true
		}
		if len(env.Feedback) == 0 {
			t.Errorf("%v: no feedback: %s", c.args, out)
		}
		for _, p := range c.phases {
			if !got[p] {
				t.Errorf("%v: no %q feedback: %s", c.args, p, out)
			}
		}
	}
}
