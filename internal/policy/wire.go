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
	w.Violations = r.Violations
	return w
}
