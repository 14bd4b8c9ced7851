package gap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/kits"
)

// fakeDeps reports every binary named "missing-*" as absent.
type fakeDeps struct{}

func (fakeDeps) Check(d manifest.Dependency) error {
	if strings.HasPrefix(d.Name, "missing-") {
		return errors.New("binary " + d.Name + " is not on PATH")
	}
	return nil
}

func testRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	root := t.TempDir()
	tool := func(name, body string) {
		d := filepath.Join(root, "tools", name)
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, "tool.yaml"), []byte("name: "+name+"\nversion: 1.0.0\ndescription: t\nentrypoint: {type: builtin, name: x}\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tool("counter", `capabilities: [text.count]
input_schema: {type: object, required: [text], additionalProperties: false, properties: {text: {type: string}, limit: {type: integer, minimum: 1}}}
output_schema: {type: object, required: [count, words], properties: {count: {type: integer}, words: {type: array, items: {type: string}}, note: {type: string}}}
`)
	tool("converter", `capabilities: [video.convert]
input_schema: {type: object, required: [input], properties: {input: {type: string}}}
output_schema: {type: object, required: [output], properties: {output: {type: string}}}
dependencies: [{kind: binary, name: missing-ffmpeg}]
`)
	// Two providers of num.square: the better-ranked one wants an integer.
	tool("square-int", `capabilities: [num.square]
priority: 10
input_schema: {type: object, required: [n], properties: {n: {type: integer}}}
output_schema: {type: object, properties: {r: {type: number}}}
`)
	// A tool that says nothing of its data (an imported MCP tool's way).
	tool("vague", `capabilities: [x.vague]
input_schema: {type: object}
`)
	tool("square-any", `capabilities: [num.square]
priority: 1
input_schema: {type: object, required: [n], properties: {n: {type: [integer, string]}}}
output_schema: {type: object, properties: {r: {type: number}}}
`)
	r, err := registry.Load(registry.Options{Root: root, ToolsDirs: []string{"tools"}, ActiveKits: []string{"core"}, Builtin: kits.Builtin()})
	if err != nil || len(r.Problems) > 0 {
		t.Fatalf("%v %v", err, r.Problems)
	}
	return r
}

func mustPlan(t *testing.T, src string) *plan.Plan {
	t.Helper()
	p, probs := plan.Parse("p.yaml", []byte(src))
	if len(probs) > 0 {
		t.Fatalf("%v", probs)
	}
	return p
}

func TestReasons(t *testing.T) {
	reg := testRegistry(t)
	tests := []struct {
		name    string
		steps   string
		reason  string // "" = no gap for step "s"
		message string // the gap's, or with no reason, the problem's at line 3
	}{
		{"covered", `- {id: s, capability: file.checksum, with: {path: a.txt}}`, "", ""},
		{"invalid capability", `- {id: s, capability: Checksum}`, InvalidCapability, "is not a capability"},
		{"no match", `- {id: s, capability: video.teleport, with: {path: a}}`, NoCapabilityMatch, `no tool provides video.teleport`},
		// A capability spelled near one a tool provides is the plan's
		// typo: no tool to write.
		{"misspelt capability", `- {id: s, capability: file.checksums, with: {path: a}}`, "", `no tool provides "file.checksums": did you mean "file.checksum"? (a new capability, not a typo: a tool that provides it first, capflow tools scaffold NAME --capability file.checksums)`},
		{"bad pin", `- {id: s, capability: file.checksum, tool: other-tool}`, NoCapabilityMatch, "pinned tool other-tool"},
		// The plan's own typos are positioned problems, not missing tools.
		{"missing required input", `- {id: s, capability: text.count, with: {limit: 3}}`, "", `requires input "text"`},
		{"unknown input", `- {id: s, capability: text.count, with: {text: a, txt: b}}`, "", `takes no input "txt" (did you mean "text"?)`},
		// One mistake, one problem: the required input misspelt.
		{"required input misspelt", `- {id: s, capability: text.count, with: {txet: a}}`, "", `requires input "text" and the step does not supply it (the step gives "txet": a misspelling?)`},
		{"literal of wrong type", `- {id: s, capability: text.count, with: {text: a, limit: 0}}`, "", "literal value"},
		{"low confidence", `- {id: s, capability: file.checksum, with: {path: a}, coverage_confidence: 0.4, coverage_rationale: guess}`, LowConfidence, "0.40 is below"},
		{"dependency", `- {id: s, capability: video.convert, with: {input: a.webm}}`, DependencyUnavailable, "missing-ffmpeg"},
		{"contract mismatch", `- {id: s, capability: text.count, with: {text: a}, capability_contract: {output_schema: {type: object, required: [total], properties: {total: {type: integer}}}}}`, SchemaIncompatible, "total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPlan(t, "name: t\nsteps:\n  "+tt.steps+"\n")
			res := Check(p, reg, Options{MinConfidence: 0.7, Deps: fakeDeps{}})
			if tt.reason == "" && tt.message != "" {
				if len(res.Gaps) > 0 || len(res.Problems) != 1 || res.Problems[0].Line != 3 || res.Problems[0].Code != caperr.InvalidInput ||
					!strings.HasPrefix(res.Problems[0].Field, "steps[0].") || !strings.Contains(res.Problems[0].Message, tt.message) {
					t.Fatalf("want a problem (%q) at line 3: gaps %+v problems %v", tt.message, res.Gaps, res.Problems)
				}
				return
			}
			if tt.reason == "" {
				if len(res.Gaps) > 0 || len(res.Resolution) != 1 || res.Resolution[0].Digest == "" {
					t.Fatalf("want covered: %+v", res)
				}
				return
			}
			if len(res.Gaps) != 1 || res.Gaps[0].Reason != tt.reason || !strings.Contains(res.Gaps[0].ReasonMessage, tt.message) {
				t.Fatalf("want %s (%q), got %+v", tt.reason, tt.message, res.Gaps)
			}
		})
	}
}

func TestDataFlow(t *testing.T) {
	reg := testRegistry(t)
	tests := []struct {
		name    string
		with    string // the consumer step's with, fed from step "src" (text.count) or inputs
		reason  string
		message string
	}{
		{"string output into string", `{path: "${steps.sum.data.sha256}"}`, "", ""},
		{"integer output into string input", `{path: "${steps.src.data.count}"}`, SchemaIncompatible, "type mismatch: the producer gives integer, the consumer needs string"},
		{"optional output field", `{path: "${steps.src.data.note}"}`, SchemaIncompatible, `"note" may be absent`},
		{"list element not guaranteed", `{path: "${steps.src.data.words.0}"}`, SchemaIncompatible, `"words.0" may be absent`},
		{"interpolation is a string", `{path: "out/${steps.src.data.count}.txt"}`, "", ""},
		// Nothing is known of vague's data: fine where anything goes (a key
		// text.render's values does not declare), a gap where a string is
		// needed.
		{"undescribed data where anything goes", `{path: x, extra: {s: "${steps.vague.data.content.0.text}"}}`, "", ""},
		{"undescribed data where a string is needed", `{path: "${steps.vague.data.content.0.text}"}`, SchemaIncompatible, "declares no output_schema"},
		{"plan input of the right type", `{path: "${inputs.file}"}`, "", ""},
		{"plan input of the wrong type", `{path: "${inputs.n}"}`, SchemaIncompatible, "type mismatch"},
		{"success flag into string", `{path: "${steps.src.success}"}`, SchemaIncompatible, "the producer gives boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := `name: flow
inputs: {file: {type: string}, n: {type: integer, default: 1}}
steps:
  - {id: src, capability: text.count, with: {text: hello}}
  - {id: sum, capability: file.checksum, with: {path: x}}
  - {id: vague, capability: x.vague}
  - {id: use, capability: file.checksum, with: ` + tt.with + `}
`
			res := Check(mustPlan(t, src), reg, Options{})
			var got *Gap
			for i := range res.Gaps {
				if res.Gaps[i].StepID == "use" {
					got = &res.Gaps[i]
				}
			}
			if tt.reason == "" {
				if got != nil {
					t.Fatalf("want no gap, got %+v", got)
				}
				return
			}
			if got == nil || got.Reason != tt.reason || !strings.Contains(got.ReasonMessage, tt.message) {
				t.Fatalf("want %s %q, got %+v", tt.reason, tt.message, got)
			}
		})
	}
}

// A reference to a field its producer does not return, spelled near one
// it does, is the plan's typo: a problem at its line with a "did you
// mean", not a gap proposing a tool for the step that reads it.
func TestReferenceTypoIsThePlans(t *testing.T) {
	for _, c := range []struct{ with, want string }{
		{`{path: "${steps.src.data.cont}"}`, `${steps.src.data.cont}: step src (counter@1.0.0) returns no field "cont" (did you mean "count"?)`},
		// Nothing is spelled near it: still the plan's mistake, whatever
		// the input it goes to takes (issue 54).
		{`{path: "${steps.src.data.zzzyx}"}`, `${steps.src.data.zzzyx}: step src (counter@1.0.0) returns no field "zzzyx" (it returns count, note, words)`},
		{`{path: "out/${steps.src.data.zzzyx}.txt"}`, `${steps.src.data.zzzyx}: step src (counter@1.0.0) returns no field "zzzyx" (it returns count, note, words)`},
		// Undeclared though its schema would let it be there: no gap proposing
		// a tool, the plan's mistake (it was a gap before issue 54).
		{`{path: "${steps.src.data.count_of_words}"}`, `${steps.src.data.count_of_words}: step src (counter@1.0.0) returns no field "count_of_words" (it returns count, note, words)`},
	} {
		src := `name: flow
steps:
  - {id: src, capability: text.count, with: {text: hello}}
  - {id: use, capability: file.checksum, with: ` + c.with + `}
`
		res := Check(mustPlan(t, src), testRegistry(t), Options{})
		if len(res.Gaps) != 0 || len(res.Problems) != 1 || res.Problems[0].Message != c.want ||
			res.Problems[0].Line != 4 || res.Problems[0].Field != "steps[1].with.path" || res.Problems[0].Code != caperr.InvalidInput {
			t.Errorf("%s: gaps %+v, problems %v", c.with, res.Gaps, res.Problems)
		}
	}
}

// A plan input declared wider than the tool takes it (no minimum where
// the tool has one) is the plan's to fix: one problem at its line, with
// the declaration that fits, not a tool to scaffold.
func TestInputWiderThanTheToolIsThePlans(t *testing.T) {
	src := `name: flow
inputs: {n: {type: integer}}
steps:
  - {id: use, capability: text.count, with: {text: hi, limit: "${inputs.n}"}}
`
	res := Check(mustPlan(t, src), testRegistry(t), Options{})
	want := `${inputs.n}: the plan's input "n" is declared wider than the tool takes it (the tool requires minimum 1, which the input does not declare); declare the input as the tool takes it: inputs: {n: {"minimum":1,"type":"integer"}}`
	if len(res.Gaps) != 0 || len(res.Problems) != 1 || res.Problems[0].Message != want ||
		res.Problems[0].Line != 4 || res.Problems[0].Field != "steps[0].with.limit" || res.Problems[0].Code != caperr.InvalidInput {
		t.Fatalf("gaps %+v, problems %v", res.Gaps, res.Problems)
	}
}

func TestProposalAndPriority(t *testing.T) {
	reg := testRegistry(t)
	p := mustPlan(t, `name: media-to-drive
inputs: {url: {type: string}, folder: {type: string, default: /videos}}
steps:
  - id: download
    capability: youtube.download
    with: {url: "${inputs.url}", retries: 2}
  - id: upload
    capability: drive.upload
    with: {file: "${steps.download.data.path}", folder: "${inputs.folder}"}
`)
	res := Check(p, reg, Options{})
	if len(res.Gaps) != 2 {
		t.Fatalf("%+v", res.Gaps)
	}
	d := res.Gaps[0]
	if d.StepID != "download" || d.ProposedToolName != "youtube-download" || d.Priority != "high" || d.Reason != NoCapabilityMatch {
		t.Fatalf("download gap: %+v", d)
	}
	inProps := d.ProposedInputSchema["properties"].(map[string]any)
	if inProps["url"].(map[string]any)["type"] != "string" || inProps["retries"].(map[string]any)["type"] != "integer" {
		t.Fatalf("proposed input schema: %v", d.ProposedInputSchema)
	}
	outReq := d.ProposedOutputSchema["required"].([]any)
	if len(outReq) != 1 || outReq[0] != "path" {
		t.Fatalf("proposed output schema should require what upload reads: %v", d.ProposedOutputSchema)
	}
	if res.Gaps[1].Priority != "medium" || res.Gaps[1].ProposedToolName != "drive-upload" {
		t.Fatalf("upload gap: %+v", res.Gaps[1])
	}
	if blocks := d.ReasonDetails["blocks"].([]string); len(blocks) != 1 || blocks[0] != "upload" {
		t.Fatalf("details: %v", d.ReasonDetails)
	}
}

func TestCompatibilityBeforeRank(t *testing.T) {
	reg := testRegistry(t)
	// A string flows in: the priority-10 tool cannot take it, the
	// priority-1 tool can, so it is chosen (docs/manifests.md, resolution).
	res := Check(mustPlan(t, "name: p\nsteps:\n  - {id: sq, capability: num.square, with: {n: \"7\"}}\n"), reg, Options{})
	if len(res.Gaps) != 0 || len(res.Resolution) != 1 || res.Resolution[0].Tool != "square-any" || !strings.Contains(res.Resolution[0].Reason, "square-int@1.0.0 refused") {
		t.Fatalf("want square-any chosen with the reason, got %+v gaps %+v", res.Resolution, res.Gaps)
	}
	// An integer: the better-ranked tool fits and wins.
	res = Check(mustPlan(t, "name: p\nsteps:\n  - {id: sq, capability: num.square, with: {n: 7}}\n"), reg, Options{})
	if len(res.Resolution) != 1 || res.Resolution[0].Tool != "square-int" {
		t.Fatalf("want square-int, got %+v", res.Resolution)
	}
	// Nothing fits what flows in: one gap that says why each candidate
	// was refused (a literal that fits none is the plan's typo: a problem).
	res = Check(mustPlan(t, "name: p\ninputs: {l: {type: array}}\nsteps:\n  - {id: sq, capability: num.square, with: {n: \"${inputs.l}\"}}\n"), reg, Options{})
	if len(res.Gaps) != 1 || res.Gaps[0].Reason != SchemaIncompatible {
		t.Fatalf("want one schema_incompatible gap, got %+v", res.Gaps)
	}
	refused, _ := res.Gaps[0].ReasonDetails["candidates"].([]Refusal)
	if len(refused) != 2 || refused[0].Tool != "square-int@1.0.0" || refused[1].Tool != "square-any@1.0.0" || !strings.Contains(res.Gaps[0].ReasonMessage, "none of 2 candidates") {
		t.Fatalf("refusals: %+v (%s)", refused, res.Gaps[0].ReasonMessage)
	}
}

func TestControlFlowChecks(t *testing.T) {
	reg := testRegistry(t)
	base := "name: p\nsteps:\n  - {id: find, capability: file.list, with: {dir: .}}\n"
	cases := []struct {
		name, step, reason, problem string
	}{
		{"items feed a string input", `  - {id: sum, capability: file.checksum, for_each: "${steps.find.data.files}", with: {path: "${item}"}}`, "", ""},
		{"named item", `  - {id: sum, capability: file.checksum, for_each: "${steps.find.data.files}", as: f, with: {path: "${f}"}}`, "", ""},
		{"a string item into an integer input", `  - {id: rd, capability: file.read, for_each: "${steps.find.data.files}", with: {path: x, max_bytes: "${item}"}}`, SchemaIncompatible, ""},
		{"a source that is not a list", `  - {id: sum, capability: file.checksum, for_each: "${steps.find.data.count}", with: {path: x}}`, SchemaIncompatible, ""},
		{"a condition that type-checks", `  - {id: sum, capability: file.checksum, when: "size(steps.find.data.files) > 3", with: {path: x}}`, "", ""},
		{"a list compared with an int", `  - {id: sum, capability: file.checksum, when: "steps.find.data.files > 3", with: {path: x}}`, "", "no matching overload"},
		{"an undeclared field", `  - {id: sum, capability: file.checksum, when: "steps.find.data.nope == 1", with: {path: x}}`, "", "undefined field 'nope'"},
		{"data of a step that may be skipped", "  - {id: maybe, capability: file.list, when: \"inputs.x\", with: {dir: .}}\n  - {id: use, capability: file.checksum, with: {path: \"${steps.maybe.data.dir}\"}}", SchemaIncompatible, ""},
	}
	for _, c := range cases {
		src := base + c.step + "\n"
		if c.name == "data of a step that may be skipped" {
			src = "name: p\ninputs: {x: {type: boolean}}\nsteps:\n" + c.step + "\n"
		}
		res := Check(mustPlan(t, src), reg, Options{})
		reasons := map[string]bool{}
		for _, g := range res.Gaps {
			reasons[g.Reason] = true
		}
		switch {
		case c.reason == "" && len(res.Gaps) > 0:
			t.Errorf("%s: unexpected gaps %+v", c.name, res.Gaps)
		case c.reason != "" && !reasons[c.reason]:
			t.Errorf("%s: want a %s gap, got %+v", c.name, c.reason, res.Gaps)
		}
		switch {
		case c.problem == "" && len(res.Problems) > 0:
			t.Errorf("%s: unexpected problems %v", c.name, res.Problems)
		case c.problem != "" && (len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Error(), c.problem) || res.Problems[0].Line != 4):
			t.Errorf("%s: want a problem at line 4 with %q, got %v", c.name, c.problem, res.Problems)
		}
	}
}

func TestConditionProblemsPointAtWhen(t *testing.T) {
	src := "name: p\nsteps:\n  - id: find\n    capability: file.list\n    with: {dir: .}\n  - id: sum\n    capability: file.checksum\n    with: {path: x}\n    when: steps.find.data.files > 3\n"
	res := Check(mustPlan(t, src), testRegistry(t), Options{})
	if len(res.Problems) != 1 || res.Problems[0].Line != 9 || res.Problems[0].Column != 11 || res.Problems[0].Field != "steps[1].when" {
		t.Fatalf("want the problem at 9:11 steps[1].when, got %v", res.Problems)
	}
}

func TestOutputsReadDeclaredData(t *testing.T) {
	src := "name: p\noutputs: {n: \"${steps.find.data.count}\", bad: \"${steps.find.data.nofield}\"}\nsteps:\n  - {id: find, capability: file.list, with: {dir: .}}\n"
	res := Check(mustPlan(t, src), testRegistry(t), Options{})
	if len(res.Problems) != 1 || res.Problems[0].Field != "outputs.bad" || !strings.Contains(res.Problems[0].Message, "nofield") {
		t.Fatalf("%v", res.Problems)
	}
}

// A step that names a server must depend on the step that starts it.
func TestServerNamesNeedTheirStart(t *testing.T) {
	reg, err := registry.Load(registry.Options{Root: t.TempDir(), ActiveKits: []string{"core", "runtime"}, Builtin: kits.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	head := "name: p\nsteps:\n  - {id: web, capability: server.start, with: {name: api, command: [sleep, '60']}}\n"
	cases := []struct {
		name, steps, want string
	}{
		{"waits after its start", "  - {id: wait, capability: server.wait_ready, needs: [web], with: {name: api}}\n", ""},
		{"stops after a step after its start", "  - {id: wait, capability: server.wait_ready, needs: [web], with: {name: api}}\n  - {id: stop, capability: server.stop, needs: [wait], with: {name: api}}\n", ""},
		{"stops everything", "  - {id: stop, capability: server.stop, with: {}}\n", ""},
		{"a name built at run time", "  - {id: wait, capability: server.wait_ready, with: {name: '${steps.web.data.log_path}'}}\n", ""},
		{"races its start", "  - {id: wait, capability: server.wait_ready, with: {name: api}}\n",
			"step wait names server \"api\", started by step web, which it does not depend on: add needs: [web]"},
		{"a server no step starts", "  - {id: stop, capability: server.stop, needs: [web], with: {name: apj}}\n",
			"step stop names server \"apj\", which no step of the plan starts"},
		{"logs of a server it does not wait for", "  - {id: logs, capability: logs.collect, with: {sources: [api, app.log]}}\n",
			"step logs names server \"api\", started by step web"},
		{"logs of a file", "  - {id: logs, capability: logs.collect, with: {sources: [app.log]}}\n", ""},
	}
	// A start step with a gap (an integer in its command) still starts
	// the server it names: its gap is reported, not "no step starts it".
	gapped := "name: p\ninputs: {port: {type: integer}}\nsteps:\n  - {id: web, capability: server.start, with: {name: api, command: [sleep, '${inputs.port}']}}\n" +
		"  - {id: stop, capability: server.stop, needs: [web], with: {name: api}}\n"
	if p, probs := plan.Parse("p.yaml", []byte(gapped)); len(probs) > 0 {
		t.Fatal(probs)
	} else if res := Check(p, reg, Options{}); len(res.Problems) != 0 || len(res.Gaps) != 1 || res.Gaps[0].StepID != "web" {
		t.Errorf("a start step with a gap: problems %v, gaps %+v", res.Problems, res.Gaps)
	}
	for _, c := range cases {
		p, probs := plan.Parse("p.yaml", []byte(head+c.steps))
		if len(probs) > 0 {
			t.Fatalf("%s: %v", c.name, probs)
		}
		res := Check(p, reg, Options{})
		got := ""
		if len(res.Problems) > 0 {
			got = res.Problems[0].Message
			if res.Problems[0].Line != 4 || !strings.HasPrefix(res.Problems[0].Field, "steps[1].with.") {
				t.Errorf("%s: positioned at %d %s", c.name, res.Problems[0].Line, res.Problems[0].Field)
			}
		}
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// A proposal never names an existing tool: a file.read step whose inputs
// file-read cannot take proposes a tool beside it, not one that shadows it.
func TestProposalNeverShadowsATool(t *testing.T) {
	p := mustPlan(t, "name: p\ninputs: {e: {type: integer}}\nsteps:\n  - {id: grab, capability: file.read, with: {path: x, encoding: \"${inputs.e}\"}}\n")
	res := Check(p, testRegistry(t), Options{})
	if len(res.Gaps) != 1 || res.Gaps[0].Reason != SchemaIncompatible || res.Gaps[0].ProposedToolName != "file-read-grab" {
		t.Fatalf("%+v", res.Gaps)
	}
}
