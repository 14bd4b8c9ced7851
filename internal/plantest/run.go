package plantest

import (
	"time"

	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/preflight"
)

// Report is how a plan's test went.
type Report struct {
	Plan     string    `json:"plan"`
	File     string    `json:"file"`
	Cases    []*Result `json:"cases"`
	Passed   int       `json:"passed"`
	Failed   int       `json:"failed"`
	Coverage *Coverage `json:"coverage,omitempty"`
	// DurationMS is the whole test's time, cases and set-up.
	DurationMS int64 `json:"duration_ms"`
}

type caseRun struct {
	result  *Result
	reasons map[string]string
	// decisions are the actions people took on each step.
	decisions map[string][]string
}

// HappyPath is the case made up for a plan with no case file: its
// default inputs, every step answering its generated result, and the run
// expected to pass, or, when the plan has gaps or the policy refuses it,
// to end as `capflow plan check` says.
func (s *Suite) HappyPath() *Case {
	want := "passed"
	if st := s.Report.Status; st != preflight.Ready && st != preflight.Invalid {
		want = st
	}
	steps := map[string]Given{}
	yes := true
	for _, st := range s.Plan.Steps {
		if s.waitsForPerson(st.ID) {
			// The happy path: every approval given.
			steps[st.ID] = Given{Decision: &GivenDecision{Approved: &yes, By: "plan test (generated)"}}
		}
		if st.Agent != nil {
			// Its model finishes at once, with data its output_schema takes.
			steps[st.ID] = Given{Model: []llm.Response{finishing(st.OutputSchema)}}
		}
	}
	return &Case{Name: happyName, Inputs: s.sampleInputs(), Steps: steps, Expect: Expect{Status: want}}
}

// sampleInputs gives each required input without a default a value its
// declaration accepts (examples first).
func (s *Suite) sampleInputs() map[string]any {
	in := map[string]any{}
	for name, decl := range s.Plan.Inputs {
		if _, ok := decl["default"]; ok {
			continue
		}
		if req, ok := decl["required"].(bool); ok && !req {
			continue
		}
		in[name] = generated(decl)
	}
	return in
}

const happyName = "happy path (generated)"

// Run runs the cases, one after the other, and measures their coverage.
func (s *Suite) Run(cases []*Case) *Report {
	start := time.Now()
	rep := &Report{Plan: s.Plan.Name, File: s.File}
	var runs []caseRun
	for i, c := range cases {
		t0 := time.Now()
		o := s.run(c, i+1)
		r := check(c, o)
		r.DurationMS = time.Since(t0).Milliseconds()
		r.Generated = c.Name == happyName && c.Line == 0
		cr := caseRun{result: r, reasons: map[string]string{}, decisions: map[string][]string{}}
		if o.res != nil {
			for _, st := range o.res.Steps {
				cr.reasons[st.ID] = st.Reason
				for _, d := range st.Decisions {
					cr.decisions[st.ID] = append(cr.decisions[st.ID], string(d.Action))
				}
			}
		}
		runs = append(runs, cr)
		rep.Cases = append(rep.Cases, r)
		if r.Passed {
			rep.Passed++
		} else {
			rep.Failed++
		}
	}
	rep.Coverage = cover(s.Plan, runs)
	rep.DurationMS = time.Since(start).Milliseconds()
	return rep
}
