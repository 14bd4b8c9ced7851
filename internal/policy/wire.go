package policy

import "github.com/capflow/capflow/client"

// Wire is r as clients read it.
func (r *Report) Wire() *client.PolicyReport {
	if r == nil {
		return nil
	}
	w := &client.PolicyReport{Source: r.Source, Allowed: r.Allowed, Limits: r.Limits, MaxParallel: r.MaxParallel, Notes: r.Notes}
	if r.Sandbox != SandboxDefault {
		w.Sandbox = r.Sandbox.String()
	}
	if r.Violations != nil {
		w.Violations = make([]client.Violation, len(r.Violations))
		for i, v := range r.Violations {
			w.Violations[i] = client.Violation(v)
		}
	}
	return w
}
