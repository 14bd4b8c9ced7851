package plan

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

const good = `name: media-to-drive
version: 1
inputs:
  url: {type: string}
  folder: {type: string, default: /videos}
  count: {type: integer, default: 2}
failure_policy: fail_fast
steps:
  - id: download
    capability: youtube.download
    with: {url: "${inputs.url}"}
  - id: upload
    capability: drive.upload
    with:
      file: ${steps.download.data.path}
      folder: ${inputs.folder}
      note: "from ${inputs.url} ($${literal})"
    critical: true
  - id: notify
    capability: notify.send
    needs: [upload]
    with: {ok: "${steps.upload.success}", first: "${steps.download.data.files.0}"}
    join: {policy: quorum, min: 2}
`

func TestParseGood(t *testing.T) {
	p, probs := Parse("p.yaml", []byte(good))
	if len(probs) > 0 {
		t.Fatalf("%v", probs)
	}
	if p.FailurePolicy != FailFast || p.Step("upload").OnFailure != OnFailureRetry || p.Step("download").Join.Policy != JoinAll {
		t.Fatalf("defaults: %+v", p)
	}
	if got := strings.Join(p.Step("notify").Deps, ","); got != "download,upload" {
		t.Fatalf("implicit deps = %s", got)
	}
	if p.Step("notify").Required() != 2 || p.Step("upload").Line != 12 {
		t.Fatalf("required/line: %d %d", p.Step("notify").Required(), p.Step("upload").Line)
	}
	var order []string
	for _, s := range p.Order() {
		order = append(order, s.ID)
	}
	if strings.Join(order, ",") != "download,upload,notify" {
		t.Fatalf("order = %v", order)
	}
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "line:field: fragment"
	}{
		{"cycle", "name: c\nsteps:\n  - {id: a, capability: x.y, needs: [c]}\n  - {id: b, capability: x.y, needs: [a]}\n  - {id: c, capability: x.y, with: {v: '${steps.b.data.x}'}}\n",
			[]string{"3:steps[0].id: dependency cycle: a → b → c → a"}},
		{"self and dangling", "name: d\ninputs: {url: {type: string}}\nsteps:\n  - {id: a, capability: x.y, needs: [a, bb], with: {u: '${inputs.ulr}', v: '${steps.nope.data}', w: '${steps.a.success}'}}\n  - {id: b, capability: x.y}\n",
			[]string{`4:steps[0].needs[0]: cannot need itself`, `4:steps[0].needs[1]: needs unknown step "bb" (did you mean "b"?)`, `4:steps[0].with.u: the plan has no input "ulr" (did you mean "url"?)`, `4:steps[0].with.v: no step "nope"`, `4:steps[0].with.w: cannot reference its own result`}},
		{"reserved id endings", "name: d\nsteps:\n  - {id: a-retry-1, capability: x.y}\n  - {id: b-after-local, capability: x.y}\n  - {id: c-retry, capability: x.y}\n  - {id: d-host-2-rerun-1, capability: x.y}\n",
			[]string{`3:steps[0].id: step id "a-retry-1" ends in "-retry-1", which capflow adds`, `4:steps[1].id: step id "b-after-local" ends in "-after-local"`, `6:steps[3].id: step id "d-host-2-rerun-1" ends in "-host-2-rerun-1"`}},
		{"duplicate ids", "name: d\nsteps:\n  - {id: a, capability: x.y}\n  - {id: a, capability: x.z}\n", []string{`4:steps[1].id: duplicate step id "a"`}},
		{"wrong types", "name: d\nmax_parallel: many\nfailure_policy: sometimes\nsteps:\n  - {id: A B, capability: 3, join: {policy: most}}\n",
			[]string{"2:max_parallel: must be integer", `3:failure_policy: must be one of fail_fast, continue_all, critical_path`, "5:steps[0].id: ", "5:steps[0].capability: must be string", "5:steps[0].join.policy: must be one of all, any, quorum"}},
		{"join consistency", "name: j\nsteps:\n  - {id: a, capability: x.y}\n  - {id: b, capability: x.y}\n  - {id: q, capability: x.y, needs: [a, b], join: {policy: quorum, min: 3}}\n  - {id: r, capability: x.y, join: {policy: any}}\n  - {id: s, capability: x.y, needs: [a], join: {policy: quorum}}\n",
			[]string{"5:steps[2].join.min: quorum min 3 exceeds the 2 dependencies", `6:steps[3].join: a any join needs dependencies`, "7:steps[4].join: a quorum join needs min"}},
		{"bad reference syntax", "name: r\nsteps:\n  - {id: a, capability: x.y, with: {u: '${inputs}', v: '${steps.a}', w: '${oops.x}', z: '${inputs.x'}}\n",
			[]string{"3:steps[0].with.u: names no input", "3:steps[0].with.v: is incomplete", "3:steps[0].with.w: is not a reference root", "3:steps[0].with.z: unterminated reference"}},
		{"unknown field", "name: u\nstep: []\n", []string{`1:steps: missing required field "steps"`, `2:step: unknown field "step" (did you mean "steps"?)`}},
		{"cache settings", "name: c\nsteps:\n  - {id: a, capability: x.y, cache: yes}\n  - {id: b, capability: x.y, cache: {ttl: 5x}}\n  - {id: c, capability: x.y, cache: {tll: 1h}}\n",
			[]string{"3:steps[0].cache: must be boolean or object", `4:steps[1].cache.ttl: "5x" is not a duration`, `5:steps[2].cache.tll: unknown field "tll" (did you mean "ttl"?)`}},
		// One round: the schema's problems come with the ids' and needs'.
		{"schema, ids and needs at once", "name: r\nsteps:\n  - {id: a, capability: x.y, join: {policy: most}}\n  - {id: a, capability: x.y}\n  - {id: c, capability: x.y, needs: [b]}\n",
			[]string{"3:steps[0].join.policy: must be one of all, any, quorum", `4:steps[1].id: duplicate step id "a"`, `5:steps[2].needs[0]: needs unknown step "b"`}},
		{"cache on a sub-plan", "name: c\nsteps:\n  - {id: d, plan: sub.yaml, cache: true}\n", []string{"3:steps[0].cache: cache does not apply to a sub-plan step"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, probs := Parse("bad.yaml", []byte(tt.src))
			if p != nil {
				t.Fatal("bad plan accepted")
			}
			var got []string
			for _, pr := range probs {
				if pr.Code != caperr.InvalidInput || pr.File != "bad.yaml" {
					t.Errorf("problem %v: code %s", pr, pr.Code)
				}
				got = append(got, itoa(pr.Line)+":"+pr.Field+": "+pr.Message)
			}
			for _, w := range tt.want {
				parts := strings.SplitN(w, ": ", 2)
				ok := false
				for _, g := range got {
					if strings.HasPrefix(g, parts[0]+": ") && strings.Contains(g, parts[1]) {
						ok = true
					}
				}
				if !ok {
					t.Errorf("want %q in:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestResolveInputs(t *testing.T) {
	p, _ := Parse("p.yaml", []byte(good))
	in, _, probs := p.ResolveInputs(map[string]any{"url": "http://x"}, true)
	if len(probs) > 0 || in["folder"] != "/videos" || in["url"] != "http://x" {
		t.Fatalf("%v %v", in, probs)
	}
	_, missing, probs := p.ResolveInputs(map[string]any{}, false)
	if len(probs) != 0 || len(missing) != 1 || missing[0] != "url" {
		t.Fatalf("optional: %v %v", missing, probs)
	}
	_, _, probs = p.ResolveInputs(map[string]any{"ulr": "x", "count": "two"}, true)
	all := probs.Error()
	for _, w := range []string{`unknown input "ulr" (did you mean "url"?)`, `missing required input "url"`, "inputs: count: must be integer"} {
		if !strings.Contains(all, w) {
			t.Errorf("missing %q in %s", w, all)
		}
	}
}

func TestEval(t *testing.T) {
	sc := Scope{Inputs: map[string]any{"n": int64(3), "s": "x"}, Steps: map[string]StepOutcome{
		"a": {Success: true, Data: map[string]any{"files": []any{"f1", "f2"}, "meta": map[string]any{"size": 10.0}}}}}
	got, err := sc.Eval(map[string]any{
		"n": "${inputs.n}", "f": "${steps.a.data.files.1}", "ok": "${steps.a.success}",
		"msg": "n=${inputs.n} s=${inputs.s} m=${steps.a.data.meta}", "lit": "$${inputs.n}", "list": []any{"${steps.a.data.meta.size}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := got.(map[string]any)
	if m["n"] != int64(3) || m["f"] != "f2" || m["ok"] != true || m["msg"] != `n=3 s=x m={"size":10}` || m["lit"] != "${inputs.n}" || m["list"].([]any)[0] != 10.0 {
		t.Fatalf("%#v", m)
	}
	for _, bad := range []string{"${steps.a.data.nope}", "${steps.a.data.files.9}", "${steps.b.success}", "${inputs.zz}", "${steps.a.data.files.0.x}"} {
		if _, err := sc.Eval(bad); err == nil {
			t.Errorf("%s resolved", bad)
		}
	}
}

func TestGraphs(t *testing.T) {
	p, _ := Parse("p.yaml", []byte(good))
	m := Mermaid(p, map[string]Node{"download": {Detail: "⚠ gap: no_capability_match", Class: "gap"}, "upload": {Detail: "→ drive@1.0.0", Class: "ready"}})
	for _, w := range []string{"flowchart TD", `n0["<b>download</b><br/>youtube.download<br/>⚠ gap: no_capability_match"]:::gap`, "n0 --> n1", "n1 --> n2", "n0 --> n2", "join: quorum ≥2/2", "classDef gap"} {
		if !strings.Contains(m, w) {
			t.Errorf("mermaid lacks %q:\n%s", w, m)
		}
	}
	d := Dot(p, nil)
	if !strings.Contains(d, `"download" -> "upload";`) || !strings.HasPrefix(d, `digraph "media-to-drive"`) {
		t.Errorf("dot:\n%s", d)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("name: x\nsteps: [{id: a, capability: b.c, needs: [a]}]"))
	f.Add([]byte(`{"name":"j","steps":[{"id":"a","capability":"x.y","with":{"v":"${steps.a.data.0}"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, probs := Parse("f.yaml", b)
		if (p == nil) == (len(probs) == 0) {
			t.Fatalf("exactly one of plan and problems: %v %v", p, probs)
		}
		if p != nil {
			if len(p.Order()) != len(p.Steps) {
				t.Fatalf("order lost steps: an accepted plan must be acyclic")
			}
			_ = Mermaid(p, nil)
		}
	})
}

func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"${inputs.a}", "x ${steps.a.data.b.0} y", "$${", "${", "${steps..x}", "}{$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := ParseTemplate(s)
		if err != nil {
			return
		}
		_, _ = Scope{}.Eval(s)
		for _, r := range tpl.Refs() {
			if r.Kind != RefInputs && r.Kind != RefSteps && r.Kind != RefItem && r.Kind != RefIndex {
				t.Fatalf("bad kind %q", r.Kind)
			}
		}
	})
}

func TestControlFlowProblems(t *testing.T) {
	src := `name: cf
inputs:
  list: {type: array}
outputs:
  total: ${steps.ghost.data.count}
  plain: no reference here
steps:
  - id: find
    capability: file.list
    with: {dir: .}
  - id: a
    capability: x.y
    as: file
    tolerate: {failures: 1}
  - id: b
    capability: x.y
    for_each: ${steps.find.success}
    as: inputs
  - id: c
    capability: x.y
    for_each: ${steps.nope.data.files}
    tolerate: {failures: 1, ratio: 0.5}
    with: {p: "${thing.path}", i: "${index}"}
  - id: d
    capability: x.y
    when: "steps.find.data.count >"
    with: {p: "${item}"}
  - id: e
    capability: x.y
    for_each: "files: ${inputs.list}"
`
	_, probs := Parse("cf.yaml", []byte(src))
	var got []string
	for _, p := range probs {
		got = append(got, fmt.Sprintf("%d:%s: %s", p.Line, p.Field, p.Message))
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"5:outputs.total: ${steps.ghost.data.count}: no step \"ghost\"",
		"6:outputs.plain: output \"plain\" holds no reference",
		"13:steps[1].as: as applies to for_each steps only",
		"14:steps[1].tolerate: tolerate applies to for_each steps only",
		"17:steps[2].for_each: for_each ${steps.find.success}: success is not a list",
		"18:steps[2].as: as \"inputs\" is reserved",
		"21:steps[3].for_each: ${steps.nope.data.files}: no step \"nope\"",
		"22:steps[3].tolerate: give failures or ratio, not both",
		"23:steps[3].with.p: ${thing.path}: this step's item is named \"item\"",
		"26:steps[4].when: when \"steps.find.data.count >\"",
		"27:steps[4].with.p: ${item}: \"item\" is not a reference root",
		"30:steps[5].for_each: for_each must be exactly one reference",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
}

// A step past 1 MB is refused before the run, naming it.
func TestStepSizeLimit(t *testing.T) {
	big := strings.Repeat("x", MaxStepBytes+10)
	src := "name: big\nsteps:\n  - {id: small, capability: text.render, with: {template: ok}}\n  - id: huge\n    capability: text.render\n    with: {template: \"" + big + "\"}\n"
	_, probs := Parse("big.yaml", []byte(src))
	if len(probs) != 1 || probs[0].Line != 4 || probs[0].Field != "steps[1]" || !strings.Contains(probs[0].Message, `step "huge" is 1024 KB`) {
		t.Fatalf("problems: %v", probs)
	}
	ok := strings.Repeat("x", MaxStepBytes-100)
	if _, probs := Parse("ok.yaml", []byte("name: ok\nsteps:\n  - {id: a, capability: text.render, with: {template: \""+ok+"\"}}\n  - {id: b, capability: text.render, with: {template: \""+ok+"\"}}\n")); len(probs) != 0 {
		t.Fatalf("two steps just under the limit: %v", probs)
	}
}

// A plan given as a value of Go types the YAML reader does not take is
// read as JSON written here: its steps have no line (every one would be
// line 1 of a file no one has).
func TestFromValueOfGoTypesHasNoLines(t *testing.T) {
	p, probs := FromValue("plan", map[string]any{"name": "x", "steps": []map[string]any{
		{"id": "a", "capability": "text.render"}, {"id": "b", "capability": "text.render", "when": "true"}}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	for _, s := range p.Steps {
		if s.Line != 0 || s.WhenLine != 0 {
			t.Fatalf("step %s at line %d (when at %d)", s.ID, s.Line, s.WhenLine)
		}
	}
}

// A default of the wrong type is the plan's own mistake: said at its line
// in the plan, where a given value's is said by its name.
func TestAWrongDefaultIsPlaced(t *testing.T) {
	src := "name: d\ninputs:\n  s: {type: string, default: 5}\nsteps:\n  - {id: a, capability: x.y, with: {v: \"${inputs.s}\"}}\n"
	p, probs := Parse("d.yaml", []byte(src))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	_, _, probs = p.ResolveInputs(nil, true)
	if len(probs) != 1 || probs[0].File != "d.yaml" || probs[0].Line != 3 || probs[0].Field != "inputs.s.default" || !strings.Contains(probs[0].Message, "must be string") {
		t.Fatalf("%+v", probs)
	}
	_, _, probs = p.ResolveInputs(map[string]any{"s": 6}, true)
	if len(probs) != 1 || probs[0].File != "inputs" || probs[0].Field != "s" {
		t.Fatalf("a given value: %+v", probs)
	}
}
