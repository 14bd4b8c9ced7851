package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

func TestDecisions(t *testing.T) {
	p, err := Parse("policy.yaml", []byte("allow: [\"file.*\", \"http.*\"]\ndeny: [\"http.delete\"]\nlimits: {max_steps: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cap  string
		ok   bool
		rule string
	}{
		{"file.read", true, ""},
		{"http.request", true, ""},
		{"http.delete", false, `deny "http.delete"`},
		{"shell.exec", false, `allow ["file.*", "http.*"] has no match`},
	}
	for _, tt := range tests {
		d := p.Capability(tt.cap)
		if d.Allowed != tt.ok || d.Rule != tt.rule {
			t.Errorf("%s: %+v", tt.cap, d)
		}
	}
	if p.Limits[MaxSteps] != 3 || p.Limits[MaxParallel] != 16 {
		t.Fatalf("limits: %v", p.Limits)
	}
}

func TestProjectPolicySetsLimits(t *testing.T) {
	p, err := Parse("policy.yaml", []byte("limits: {max_steps: 5000, max_parallel: 2}\n"))
	if err != nil || p.Limits[MaxSteps] != 5000 || p.Limits[MaxParallel] != 2 || p.Limits[MaxRunSeconds] != 3600 {
		t.Fatalf("%v %v", err, p.Limits)
	}
}

func TestNarrowNeverWidens(t *testing.T) {
	base, _ := Parse("policy.yaml", []byte("allow: [\"file.*\", \"http.*\"]\nlimits: {max_parallel: 4}\n"))
	n := base.Narrow(Spec{Allow: []string{"*.*"}, Deny: []string{"file.write"}, Limits: map[string]int{MaxParallel: 32, MaxSteps: 10}}, "plan p")
	if n.Capability("shell.exec").Allowed {
		t.Fatal("a plan's allow must not widen the project's")
	}
	if n.Capability("file.write").Allowed || !n.Capability("file.read").Allowed {
		t.Fatal("plan deny not applied")
	}
	if n.Limits[MaxParallel] != 4 || n.Limits[MaxSteps] != 10 || len(n.Notes) != 1 || !strings.Contains(n.Notes[0], "max_parallel 32") {
		t.Fatalf("limits %v notes %v", n.Limits, n.Notes)
	}
	if base.Limits[MaxSteps] != 200 {
		t.Fatal("Narrow changed the base policy")
	}
	if n.EffectiveParallel(0) != 4 || n.EffectiveParallel(2) != 2 || n.EffectiveParallel(8) != 4 {
		t.Fatal("EffectiveParallel")
	}
}

func TestCheck(t *testing.T) {
	p, _ := Parse("policy.yaml", []byte("deny: [\"shell.*\"]\nlimits: {max_steps: 2, max_tool_retries: 2, max_run_seconds: 60}\n"))
	v := p.Check([]StepFacts{{ID: "a", Capability: "shell.exec"}, {ID: "b", Capability: "x.y", MaxAttempts: 5}, {ID: "c", Capability: "x.y"}}, 0)
	var got []string
	for _, x := range v {
		got = append(got, x.StepID+"|"+x.Rule)
	}
	// A step timeout longer than max_run_seconds is no violation: the run
	// clamps it to what is left of its time.
	want := "|limits.max_steps: 2,a|deny \"shell.*\",b|limits.max_tool_retries: 2"
	if strings.Join(got, ",") != want {
		t.Fatalf("got %v", got)
	}
}

func TestBadPolicy(t *testing.T) {
	_, err := Parse("policy.yaml", []byte("alow: [x]\nlimits: {max_steps: -1, max_parallell: 3}\ndeny: [\"[\"]\n"))
	var probs caperr.Problems
	if !errors.As(err, &probs) || len(probs) != 4 {
		t.Fatalf("%v", err)
	}
	all := probs.Error()
	for _, w := range []string{`policy.yaml:1:1: alow: unknown field "alow" (did you mean "allow"?)`, "policy.yaml:2:", `did you mean "max_parallel"`, `"[" is not a valid glob`} {
		if !strings.Contains(all, w) {
			t.Errorf("missing %q in\n%s", w, all)
		}
	}
	if probs[0].Code != caperr.ConfigError {
		t.Fatal("policy problems are CONFIG_ERROR")
	}
	p, err := Load("/nonexistent/policy.yaml", "policy.yaml")
	if err != nil || p.Limits[MaxSteps] != 200 || p.Allow != nil {
		t.Fatalf("absent policy = allow all: %v %+v", err, p)
	}
}

// TestTooManyStepsSaysWhereToRaiseIt: the refusal names the policy's
// limit, or says no policy goes past the ceiling.
func TestTooManyStepsSaysWhereToRaiseIt(t *testing.T) {
	p := &Policy{Limits: map[string]int{MaxSteps: 200}}
	if v := p.TooManySteps(201); v == nil || !strings.Contains(v.Message, "the policy allows 200 (limits.max_steps in the project's policy (policy.yaml) raises it") {
		t.Fatalf("%+v", v)
	}
	if v := p.TooManySteps(200); v != nil {
		t.Fatalf("200 steps: %+v", v)
	}
	if v := (&Policy{Limits: map[string]int{}}).TooManySteps(CeilingSteps + 1); v == nil || !strings.Contains(v.Message, "no policy raises it") {
		t.Fatalf("past the ceiling: %+v", v)
	}
}

// TestNetworkAllow: network.allow entries are read, a bad one is named
// with its line and field.
func TestNetworkAllow(t *testing.T) {
	p, err := Parse("policy.yaml", []byte("network:\n  allow: [127.0.0.1, \"10.0.0.0/8\", \"db.internal:5432\"]\n"))
	if err != nil || len(p.Network) != 3 || p.Network[2].Host != "db.internal" || p.Network[2].Port != 5432 {
		t.Fatalf("%v %+v", err, p)
	}
	_, err = Parse("policy.yaml", []byte("network:\n  allow:\n    - 127.0.0.1\n    - http://db.internal\n"))
	if err == nil || !strings.Contains(err.Error(), `policy.yaml:4:7: network.allow[1]: "http://db.internal": write the host or address`) {
		t.Fatalf("%v", err)
	}
	_, err = Parse("policy.yaml", []byte("network: {alow: [x]}\n"))
	if err == nil || !strings.Contains(err.Error(), `did you mean "allow"`) {
		t.Fatalf("%v", err)
	}
}

// The router's model calls leave fewer of max_llm_calls to the plan's
// agent steps, and the policy says why.
func TestSpentLLMCalls(t *testing.T) {
	p := Default()
	left := p.Spent(MaxLLMCalls, 2, "the request's route")
	if left.Limits[MaxLLMCalls] != 1 || p.Limits[MaxLLMCalls] != 3 || len(left.Notes) != 1 || left.Notes[0] != "the request's route made 2 of max_llm_calls 3: 1 left" {
		t.Fatalf("%v %v", left.Limits, left.Notes)
	}
	if v := left.TooManyLLMCalls(2); v == nil || !strings.Contains(v.Message, "the policy allows 1") {
		t.Fatalf("%+v", v)
	}
	if p.Spent(MaxLLMCalls, 0, "x") != p {
		t.Fatal("nothing spent, a new policy")
	}
}
