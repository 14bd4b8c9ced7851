package plantest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

// An agent step's model answers are the case's: only an agent step takes
// them, and an agent step takes no data or error.
func TestAgentModelAnswers(t *testing.T) {
	s := prepare(t, filepath.Join(repo(t), "plans", "examples", "agent-triage.yaml"))
	bad := filepath.Join(t.TempDir(), "cases.yaml")
	_ = os.WriteFile(bad, []byte(`cases:
  - name: wrong
    steps:
      find: {model: [{finish: {}}]}
      triage: {data: {largest: a}}
`), 0o644)
	_, err := s.LoadCases(bad)
	probs, _ := err.(caperr.Problems)
	var got []string
	for _, p := range probs {
		got = append(got, fmt.Sprintf("%d %s: %s", p.Line, p.Field, p.Message))
	}
	want := []string{"4 cases[0].steps.find.model: find is not an agent step", "5 cases[0].steps.triage: triage is an agent step: give its model's answers"}
	if len(got) != 2 || !strings.HasPrefix(got[0], want[0]) || !strings.HasPrefix(got[1], want[1]) {
		t.Fatalf("got %q", got)
	}
	// A round past the case's answers fails the step, saying so.
	short := filepath.Join(t.TempDir(), "short.yaml")
	_ = os.WriteFile(short, []byte(`cases:
  - name: one call, no finish
    steps:
      triage: {model: [{calls: [{function: file__checksum, arguments: {path: plans/examples/data/a.txt}}]}]}
    expect: {status: failed, steps: {triage: failed}}
`), 0o644)
	cases, err := s.LoadCases(short)
	if err != nil {
		t.Fatal(err)
	}
	rep := s.Run(cases)
	if rep.Failed != 0 || !strings.Contains(cases[0].Name, "no finish") {
		t.Fatalf("%+v", rep.Cases[0])
	}
}

// A budget's breach waits for a person: a case's decision retries it,
// and the conversation goes on where it stopped (one more round).
func TestAgentBudgetRetried(t *testing.T) {
	s := prepare(t, filepath.Join("testdata", "agent-budget.yaml"))
	cases := filepath.Join(t.TempDir(), "cases.yaml")
	_ = os.WriteFile(cases, []byte(`cases:
  - name: a breach, then a retry
    steps:
      triage:
        model:
          - calls: [{function: file__checksum, arguments: {path: plans/examples/data/a.txt}}]
          - finish: {largest: a.txt, size: 1, sha256: "1111111111111111111111111111111111111111111111111111111111111111"}
        decision: {action: retry}
    expect: {status: passed, outputs: {largest: a.txt}}
  - name: a breach nobody answers waits
    steps:
      triage:
        model:
          - calls: [{function: file__checksum, arguments: {path: plans/examples/data/a.txt}}]
    expect: {status: failed, steps: {triage: cancelled}}
`), 0o644)
	cs, err := s.LoadCases(cases)
	if err != nil {
		t.Fatal(err)
	}
	o := s.run(cs[0], 1)
	if o.err != nil || o.res.Status != "passed" {
		t.Fatalf("%v %+v", o.err, o.res)
	}
	for _, st := range o.res.Steps {
		if st.ID == "triage" && (st.Agent == nil || len(st.Agent.Rounds) != 2 || st.Agent.Spent.LLMCalls != 2 || len(st.Decisions) != 1) {
			t.Fatalf("%+v", st)
		}
	}
	if rep := s.Run(cs[1:]); rep.Failed != 0 {
		t.Fatalf("%+v", rep.Cases[0])
	}
}
