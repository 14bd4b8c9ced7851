package activities

import (
	"context"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/wfapi"
)

// Resolve validates the plan and its inputs, resolves every step, finds
// gaps and applies policy: exactly `capflow plan check`. The result (tool
// names, versions, digests, settings) is recorded in the run's history.
func (a *Activities) Resolve(ctx context.Context, in wfapi.ResolveInput) (*wfapi.ResolveResult, error) {
	runDir := a.runDir(in.WorkflowID)
	p, probs := plan.FromValue("plan", in.Plan)
	if len(probs) == 0 {
		probs = plan.LoadSubPlans(p, a.Project.Root())
	}
	if len(probs) > 0 {
		rep := preflight.InvalidReport(planName(in.Plan), probs)
		return &wfapi.ResolveResult{Status: rep.Status, Message: rep.Message, Plan: rep.Plan, Problems: rep.Problems,
			Gaps: []gap.Gap{}, Resolution: []gap.StepResolution{}, RunDir: runDir, SearchAttributes: a.SearchAttributes, PlanValue: in.Plan}, nil
	}
	reg, err := a.registry()
	if err != nil {
		return nil, temporal.NewApplicationErrorWithOptions(err.Error(), string(caperr.CodeOf(err)), temporal.ApplicationErrorOptions{NonRetryable: !caperr.Lookup(caperr.CodeOf(err)).Retryable})
	}
	pol, err := a.Project.Policy()
	if err != nil {
		return nil, temporal.NewApplicationErrorWithOptions(err.Error(), string(caperr.ConfigError), temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	rep := a.Project.Check(p, in.Inputs, reg, pol, false)
	rr := Resolved(p, rep)
	rr.RunDir, rr.SearchAttributes, rr.PlanValue = runDir, a.SearchAttributes, in.Plan
	return rr, nil
}

func planName(v any) string {
	if m, ok := v.(map[string]any); ok {
		if n, ok := m["name"].(string); ok {
			return n
		}
	}
	return "plan"
}

// Resolved turns a plan and its preflight report into what the workflow
// executes: per-step tools and effective settings (clamped to policy).
func Resolved(p *plan.Plan, rep *preflight.Report) *wfapi.ResolveResult {
	rr := &wfapi.ResolveResult{
		Status: rep.Status, Message: rep.Message, Plan: p.Name, Description: p.Description, FailurePolicy: p.FailurePolicy,
		Inputs: rep.Inputs, Resolution: rep.Resolution, Gaps: rep.Gaps, Problems: rep.Problems, Notes: rep.Notes,
		Outputs: p.Outputs,
	}
	pr := rep.Policy
	rr.Policy = &pr
	rr.MaxParallel = pr.MaxParallel
	rr.MaxRunSeconds = pr.Limits[policy.MaxRunSeconds]
	maxRetries := -1
	if v, ok := pr.Limits[policy.MaxToolRetries]; ok {
		maxRetries = v
	}
	tools := map[string]*manifest.Manifest{}
	byStep := map[string]gap.StepResolution{}
	for _, r := range rep.Resolution {
		tools[r.StepID] = r.Manifest
		byStep[r.StepID] = r
	}
	for _, s := range p.Steps {
		m := tools[s.ID]
		st := preflight.Settings(p, s, m)
		rs := wfapi.ResolvedStep{ID: s.ID, Capability: s.Capability, Deps: s.Deps, Join: s.Join, OnFailure: s.OnFailure, Critical: s.Critical, With: s.With,
			ForEach: s.ForEach, MaxParallel: s.MaxParallel, Tolerate: s.Tolerate, When: s.When}
		if s.IsForEach() {
			rs.ItemName = s.ItemName()
		}
		if s.Plan != "" {
			rs.Plan, rs.PlanValue = s.Plan, s.SubValue
		}
		if m != nil {
			st = st.Clamp(maxRetries, m.Idempotent)
			r := byStep[s.ID]
			rs.Tool, rs.Version, rs.Digest, rs.Source, rs.TaskQueue, rs.Idempotent = m.Name, m.Version, r.Digest, m.Source, m.TaskQueue, m.Idempotent
		}
		rs.StepSettings = st
		rs.Summary = wfapi.StepSummary(s.ID, s.Capability, rs.Tool, rs.Version)
		if s.Plan != "" {
			rs.Summary = s.ID + " · plan " + s.Plan
		}
		rr.Steps = append(rr.Steps, rs)
	}
	return rr
}
