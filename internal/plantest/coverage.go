package plantest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/plan"
)

// Branch is one way a plan can go, and the cases that took it.
type Branch struct {
	// Kind: when (a condition), join (a step after several), step (a
	// step's own success or failure: its on_failure, severity and the
	// run's failure policy act on the failure).
	Kind string `json:"kind"`
	Step string `json:"step"`
	// Outcome: true/false for when; met/not met for a join;
	// succeeded/failed for a step (failed too when a person was asked
	// about its failure, whatever they answered); the person's answer (retry, skip, fail)
	// for a failed step with on_failure: ask.
	Outcome string   `json:"outcome"`
	Cases   []string `json:"cases"`
}

// Coverage lists every branch of the plan and who took it.
type Coverage struct {
	Branches []Branch `json:"branches"`
	Taken    int      `json:"taken"`
	Total    int      `json:"total"`
}

// branches are the plan's branches, in step order.
func branches(p *plan.Plan) []Branch {
	var out []Branch
	add := func(kind, step string, outcomes ...string) {
		for _, o := range outcomes {
			out = append(out, Branch{Kind: kind, Step: step, Outcome: o, Cases: []string{}})
		}
	}
	for _, s := range p.Steps {
		if s.When != "" {
			add("when", s.ID, "true", "false")
		}
		if len(s.Deps) > 1 || (s.Join.Policy != "" && s.Join.Policy != "all") {
			add("join", s.ID, "met", "not met")
		}
		add("step", s.ID, "succeeded", "failed")
		if s.OnFailure == "ask" {
			add("ask", s.ID, "retry", "skip", "fail")
		}
	}
	return out
}

// took says which outcome of a branch's kind a case's run came to for a
// step ("": none, the step did not get that far).
func took(kind, state, reason string) string {
	byWhen := strings.HasPrefix(reason, "when: false")
	switch kind {
	case "when":
		switch {
		case state == "skipped" && byWhen:
			return "false"
		case state == "succeeded" || state == "failed" || state == "cancelled" || state == "waiting":
			return "true"
		}
	case "join":
		switch {
		case state == "skipped" && !byWhen:
			return "not met"
		case state != "" && state != "pending" && state != "blocked" && state != "skipped":
			return "met"
		}
	case "step":
		if state == "succeeded" || state == "failed" {
			return state
		}
	}
	return ""
}

// cover records the cases' runs against the plan's branches.
func cover(p *plan.Plan, runs []caseRun) *Coverage {
	cov := &Coverage{Branches: branches(p)}
	for i := range cov.Branches {
		b := &cov.Branches[i]
		for _, r := range runs {
			if b.Kind == "ask" && slices.Contains(r.decisions[b.Step], b.Outcome) || took(b.Kind, r.result.Steps[b.Step], r.reasons[b.Step]) == b.Outcome ||
				b.Kind == "step" && b.Outcome == "failed" && askedOnFailure(r.decisions[b.Step]) {
				b.Cases = append(b.Cases, r.result.Name)
			}
		}
		if len(b.Cases) > 0 {
			cov.Taken++
		}
	}
	cov.Total = len(cov.Branches)
	return cov
}

// askedOnFailure: a person answered the step's failure (retry, skip or
// fail), so the step failed, whatever the answer then made of it (a skip
// ends it skipped; a retry may end it succeeded).
func askedOnFailure(actions []string) bool {
	return slices.ContainsFunc(actions, func(a string) bool { return a == "retry" || a == "skip" || a == "fail" })
}

// String is the coverage as people read it: one line per branch, the
// ones never taken marked.
func (c *Coverage) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "coverage: %d of %d branches taken\n", c.Taken, c.Total)
	for _, br := range c.Branches {
		who := "NEVER TAKEN"
		if len(br.Cases) > 0 {
			who = strings.Join(br.Cases, ", ")
		}
		mark := "✓"
		if len(br.Cases) == 0 {
			mark = "✗"
		}
		fmt.Fprintf(&b, "  %s %-5s %-20s %-10s %s\n", mark, br.Kind, br.Step, br.Outcome, who)
	}
	return b.String()
}
