package dag

import (
	"fmt"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
)

// Joins and failure policies (docs/plans.md, "Joins and failure policies").

// counts returns how many of a step's dependencies succeeded, ended
// otherwise, and are still open; dependencies skipped by a false
// condition count in none (they are left out of the join).
func (m *Machine) counts(n *node) (succ, bad, open int) {
	for _, d := range n.step.Deps {
		dn := m.nodes[d]
		switch {
		case dn == nil || dn.whenFalse:
		case dn.state == Succeeded:
			succ++
		case dn.state.Open():
			open++
		default:
			bad++
		}
	}
	return
}

// required is how many dependencies must succeed, over those that count
// (a join over only steps skipped by their condition is met).
func (m *Machine) required(n *node) int {
	var deps []string
	for _, d := range n.step.Deps {
		if dn := m.nodes[d]; dn != nil && !dn.whenFalse {
			deps = append(deps, d)
		}
	}
	p := plan.Step{Join: n.step.Join, Deps: deps}
	return min(p.Required(), len(deps))
}

func (m *Machine) skipReason(n *node, need int) string {
	var bad []string
	for _, d := range n.step.Deps {
		if dn := m.nodes[d]; dn != nil && !dn.state.Open() && dn.state != Succeeded && !dn.whenFalse {
			bad = append(bad, d+" "+dn.state.String())
		}
	}
	return fmt.Sprintf("join %s needs %d of %d dependencies to succeed; %s", n.step.Join.Policy, need, len(n.step.Deps), strings.Join(bad, ", "))
}

func joinNote(policy string, succ, total int) string {
	return fmt.Sprintf("%s: %d/%d (%d%%) met, continuing", policy, succ, total, succ*100/max(total, 1))
}

// Severity is a failure's severity: its code's, or for a summarising code
// (RETRY_EXHAUSTED) its cause's; a failure without a code is HIGH.
func Severity(code, cause caperr.Code) caperr.Severity {
	if code == caperr.RetryExhausted && cause != "" {
		code = cause
	}
	if code == "" {
		return caperr.High
	}
	return caperr.Lookup(code).Severity
}

// absorbed reports whether an ended step's failure (or skip) is tolerated:
// skipped on purpose (on_failure: skip, an operator's skip); a MEDIUM or
// LOW failure under by_severity; a step that is not critical under
// critical_path; otherwise when every step that needs it has an any/quorum
// join that can still be, or was, met.
func (m *Machine) absorbed(n *node) bool {
	if n.state == Skipped && (n.step.OnFailure == plan.OnFailureSkip || n.decided) {
		return true
	}
	if m.policy == plan.BySeverity && n.state == Failed {
		if sev := Severity(n.code, n.cause); sev == caperr.Medium || sev == caperr.Low {
			return true
		}
	}
	if m.policy == plan.CriticalPath && !n.step.Critical {
		return true
	}
	deps := m.dependents[n.step.ID]
	if len(deps) == 0 {
		return false
	}
	for _, d := range deps {
		dn := m.nodes[d]
		if dn.step.Join.Policy != plan.JoinAny && dn.step.Join.Policy != plan.JoinQuorum {
			return false
		}
		if dn.state == Skipped && !dn.whenFalse {
			return false
		}
		// A dependent its own condition skipped still had its join met
		// (or not): a when: false is never a failure.
		succ, _, open := m.counts(dn)
		if (dn.state == Pending || dn.whenFalse) && succ+open < m.required(dn) {
			return false
		}
	}
	return true
}

// Unabsorbed lists, in id order, the failures that decide the run.
func (m *Machine) Unabsorbed() []string {
	var out []string
	for _, id := range m.ids {
		n := m.nodes[id]
		switch {
		case n.state == Failed && !m.absorbed(n):
			out = append(out, id)
		case m.policy == plan.CriticalPath && n.step.Critical && n.state == Skipped && !n.whenFalse:
			out = append(out, id)
		}
	}
	return out
}

// checkStop applies fail_fast, critical_path and by_severity after a
// failure: the first failure that is not absorbed stops the run.
func (m *Machine) checkStop() {
	if m.stopped || m.policy == plan.ContinueAll {
		return
	}
	if bad := m.Unabsorbed(); len(bad) > 0 {
		what := "failed"
		if m.nodes[bad[0]].state == Skipped {
			what = "was skipped"
		}
		m.Stop(fmt.Sprintf("%s: step %s %s", m.policy, bad[0], what))
	}
}

// Outcome is how the run ends, with its message. timeout, when set, says
// the run's time limit ran out ("max_run_seconds (60s) exceeded").
func (m *Machine) Outcome(timeout string) (Verdict, string) {
	if m.err != nil {
		return FailedRun, "internal error: " + m.err.Error()
	}
	if m.cancelled {
		return CancelledRun, "the run was cancelled"
	}
	done, total := m.count[Succeeded], len(m.ids)
	if timeout != "" {
		return FailedRun, fmt.Sprintf("%s; %d of %d steps succeeded", timeout, done, total)
	}
	if bad := m.Unabsorbed(); len(bad) > 0 {
		n := m.nodes[bad[0]]
		return FailedRun, fmt.Sprintf("step %s %s: %s (%d of %d steps succeeded)", bad[0], n.state, n.reason, done, total)
	}
	if done == total {
		if done == 1 {
			return Passed, "the step succeeded"
		}
		return Passed, fmt.Sprintf("all %d steps succeeded", done)
	}
	byWhen := 0
	for _, id := range m.ids {
		if m.nodes[id].whenFalse {
			byWhen++
		}
	}
	if done+byWhen == total {
		ran := fmt.Sprintf("all %d steps that ran", done)
		if done == 1 {
			ran = "the one step that ran"
		}
		by := "its condition"
		if byWhen > 1 {
			by = "their conditions"
		}
		return Passed, fmt.Sprintf("%s succeeded; %d skipped by %s", ran, byWhen, by)
	}
	return Passed, fmt.Sprintf("%d of %d steps succeeded; every failure was absorbed", done, total)
}

// Warnings lists the failures by_severity absorbed, most severe first.
func (m *Machine) Warnings() []string {
	if m.policy != plan.BySeverity {
		return nil
	}
	var out []string
	for _, sev := range []caperr.Severity{caperr.Medium, caperr.Low} {
		for _, id := range m.ids {
			n := m.nodes[id]
			if n.state == Failed && Severity(n.code, n.cause) == sev {
				out = append(out, fmt.Sprintf("%s %s failed (%s): %s", sev, id, n.code, caperr.FirstLine(n.reason)))
			}
		}
	}
	return out
}
