package policy

import "github.com/capflow/capflow/wire"

// Wire is r as clients read it.
func (r *Report) Wire() *wire.PolicyReport {
	if r == nil {
		return nil
	}
	w := &wire.PolicyReport{Source: r.Source, Allowed: r.Allowed, Limits: r.Limits, MaxParallel: r.MaxParallel, Notes: r.Notes}
	if r.Sandbox != SandboxDefault {
		w.Sandbox = r.Sandbox.String()
	}
	if r.Violations != nil {
		w.Violations = make([]wire.Violation, len(r.Violations))
		for i, v := range r.Violations {
			w.Violations[i] = wire.Violation(v)
		}
	}
	return w
}
