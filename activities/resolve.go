package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/planfile"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/wire"
)

// Resolve validates the plan and its inputs, resolves every step, finds
// gaps and applies policy: exactly `capflow plan check`. The result (tool
// names, versions, digests, settings) is recorded in the run's history.
func (a *Activities) Resolve(ctx context.Context, in wfapi.ResolveInput) (*wfapi.ResolveResult, error) {
	runDir, err := a.runFolder(ctx, in.WorkflowID, "")
	if err != nil {
		return nil, appError(err)
	}
	p, name, probs := a.planOf(in)
	if len(probs) > 0 {
		rep := preflight.InvalidReport(name, probs)
		rr := &wfapi.ResolveResult{Status: rep.Status, Message: rep.Message, Plan: rep.Plan, Problems: rep.Problems,
			Gaps: []wire.Gap{}, Resolution: []wire.Resolution{}, RunDir: runDir, SearchAttributes: a.SearchAttributes}
		if err := storeBounded(rr); err != nil {
			return nil, appError(caperr.Wrap(caperr.ObservabilityError, err, "cannot store the plan's problems"))
		}
		return rr, nil
	}
	reg, pol, err := a.checker()
	if err != nil {
		return nil, appError(err)
	}
	pol = pol.Spent(policy.MaxLLMCalls, in.LLMCalls, "the request's route")
	rep := a.Project.Check(p, in.Inputs, reg, pol, false)
	if len(rep.Gaps) > 0 && activity.IsActivity(ctx) {
		m := activity.GetMetricsHandler(ctx)
		for _, g := range rep.Gaps {
			m.WithTags(map[string]string{"reason": g.Reason}).Counter(wfapi.MetricGaps).Inc(1)
		}
	}
	rr := Resolved(p, rep)
	rr.RunDir, rr.SearchAttributes = runDir, a.SearchAttributes
	rr.HostQueue, rr.HostWait, rr.EagerSteps = a.Exec.HostQueue, a.HostWait, a.EagerSteps
	rr.SharedStore = a.Exec.Artifacts != nil && a.Exec.Artifacts.Shared
	rr.SegmentEvents = a.SegmentEvents
	rr.SegmentBytes = wfapi.DefaultSegmentBytes
	rr.ItemBatch, rr.LocalFlush, rr.LocalAttempts = wfapi.DefaultItemBatch, wfapi.DefaultLocalFlush, wfapi.DefaultLocalAttempts
	rr.InlineFlushBytes, rr.InlineBatch = wfapi.DefaultInlineFlushBytes, wfapi.DefaultInlineBatch
	if rr.SegmentEvents == 0 {
		rr.SegmentEvents = wfapi.DefaultSegmentEvents
	}
	if err := storeBounded(rr); err != nil {
		return nil, appError(caperr.Wrap(caperr.ObservabilityError, err, "cannot store the gaps and policy violations"))
	}
	if err := storeSteps(ctx, rr, a.Exec.Artifacts, in.CarrySteps); err != nil {
		return nil, appError(caperr.Wrap(caperr.ObservabilityError, err, "cannot store the resolved steps"))
	}
	if in.Ahead && rr.Status == preflight.Ready && rr.StepsRef == nil && rr.PackedSteps == nil {
		rr.Ahead = a.Exec.First(rr, in.WorkflowID)
	}
	return rr, nil
}

// storeBounded keeps the result's gaps, problems and policy violations to
// wfapi.MaxListed each; when it cuts any, all of them go to
// <run>/preflight.json, where Finalize reads them for the report.
func storeBounded(rr *wfapi.ResolveResult) error {
	file := filepath.Join(rr.RunDir, wfapi.PreflightFile)
	full := rr.Bound(file)
	if full == nil {
		return nil
	}
	if err := runfolder.Make(rr.RunDir); err != nil {
		return err
	}
	return runfolder.WriteJSON(file, full, false)
}

// planOf reads the plan: the value in the input, or the project file it
// names (how plans too large for a workflow input travel). name is what
// the report calls a plan that has problems.
func (a *Activities) planOf(in wfapi.ResolveInput) (p *plan.Plan, name string, probs caperr.Problems) {
	if in.PlanFile == "" {
		p, probs := plan.FromValue("plan", in.Plan)
		if len(probs) == 0 {
			probs = plan.LoadSubPlans(p, a.Project.Root(), planfile.Read)
		}
		return p, planName(in.Plan, "plan"), probs
	}
	full, err := plan.InProject(a.Project.Root(), in.PlanFile)
	if err != nil {
		return nil, in.PlanFile, caperr.Problems{caperr.New(caperr.InvalidInput, "plan_file %v", err).At(in.PlanFile, 0, 0, "plan_file")}
	}
	data, err := planfile.Read(a.Project.Root(), in.PlanFile)
	if err != nil {
		return nil, in.PlanFile, caperr.Problems{caperr.As(err, caperr.InvalidInput).At(in.PlanFile, 0, 0, "plan_file")}
	}
	p, probs = plan.Parse(in.PlanFile, data)
	if len(probs) == 0 {
		probs = plan.LoadSubPlansOf(p, a.Project.Root(), full, planfile.Read)
	}
	name = in.PlanFile
	if len(probs) > 0 {
		if doc, err := yamldoc.Parse(in.PlanFile, data); err == nil {
			name = planName(doc.Root.Interface(), in.PlanFile)
		}
	}
	return p, name, probs
}

// storeSteps writes the resolved steps and resolution to
// <run>/resolved.json and records where (so a run can reload them when it
// continues as new); when they are too large for the Resolve result they
// leave it, and the workflow loads them page by page. Steps that stay in
// the result are not stored when the workflow carries them (carry): a
// file and a folder fewer for every small run.
func storeSteps(ctx context.Context, rr *wfapi.ResolveResult, store *artifacts.Store, carry bool) error {
	stored := storedSteps{Steps: rr.Steps, Resolution: rr.Resolution}
	raw, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	if carry && len(raw) <= wfapi.InlineStepsBytes {
		return nil
	}
	if err := runfolder.Make(rr.RunDir); err != nil {
		return err
	}
	file := filepath.Join(rr.RunDir, "resolved.json")
	if err := runfolder.WriteAtomic(file, raw); err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	ref := &wfapi.StepsRef{File: file, SHA256: hex.EncodeToString(sum[:]), Count: len(rr.Steps)}
	if store != nil && store.Shared {
		// Another host may continue the run: it reads them by digest.
		if _, err := store.Put(ctx, raw); err != nil {
			return err
		}
	}
	// Pages are cut by the size of the steps' own fields; what they share
	// is written once a page.
	from, bytes := 0, 0
	for i, s := range wfapi.PackSteps(rr.Steps).Steps {
		b, _ := json.Marshal(s)
		if bytes+len(b) > wfapi.PageBytes && i > from {
			ref.Pages = append(ref.Pages, wfapi.Page{From: from, To: i})
			from, bytes = i, 0
		}
		bytes += len(b) + 1
	}
	if len(rr.Steps) > from {
		ref.Pages = append(ref.Pages, wfapi.Page{From: from, To: len(rr.Steps)})
	}
	rr.StepsRef = ref
	if len(raw) > wfapi.InlineStepsBytes {
		// Similar steps pack small: while the whole result stays within
		// the bound, they travel packed and the run loads no pages.
		packed := wfapi.PackSteps(rr.Steps)
		rr.Steps, rr.Resolution, rr.PackedSteps = nil, nil, &packed
		if b, err := json.Marshal(rr); err != nil || len(b) > wfapi.InlineStepsBytes {
			rr.PackedSteps = nil
		}
	}
	return nil
}

// storedSteps is the content of <run>/resolved.json.
type storedSteps struct {
	Steps      []wfapi.ResolvedStep `json:"steps"`
	Resolution []wire.Resolution    `json:"resolution"`
}

// readStoredSteps reads <run>/resolved.json, checked against its digest,
// through the worker's cache (every segment of a large run reads it).
func (a *Activities) readStoredSteps(ref wfapi.StepsRef) (*storedSteps, error) {
	a.mu.Lock()
	if c := a.stepsCache; c != nil && c.sha == ref.SHA256 {
		a.mu.Unlock()
		return c.steps, nil
	}
	a.mu.Unlock()
	raw, err := os.ReadFile(ref.File)
	if err != nil {
		return nil, caperr.New(caperr.ObservabilityError, "the resolved steps are unreadable: %v", err)
	}
	sum := sha256.Sum256(raw)
	if hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, caperr.New(caperr.ObservabilityError, "the resolved steps in %s were altered since resolution", ref.File)
	}
	var st storedSteps
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, caperr.New(caperr.ObservabilityError, "the resolved steps in %s are unreadable: %v", ref.File, err)
	}
	a.mu.Lock()
	a.stepsCache = &stepsCache{sha: ref.SHA256, steps: &st}
	a.mu.Unlock()
	return &st, nil
}

// localSteps checks that the stored steps are in the run's folder on this
// worker; a run that moved hosts finds them in a shared store instead (by
// digest), brought into this host's run folder.
func (a *Activities) localSteps(ctx context.Context, id string, ref wfapi.StepsRef) (wfapi.StepsRef, error) {
	err := a.Exec.InRun(id, ref.File)
	if err == nil {
		if _, serr := os.Stat(ref.File); serr == nil {
			return ref, nil
		}
	}
	if a.Exec.Artifacts == nil || !a.Exec.Artifacts.Shared {
		return ref, err
	}
	dir, derr := a.runFolder(ctx, id, "")
	if derr != nil {
		return ref, derr
	}
	ref.File = filepath.Join(dir, "resolved.json")
	return ref, a.Exec.Artifacts.Fetch(ctx, ref.SHA256, dir, "resolved.json", step.MaxStoredData)
}

type stepsCache struct {
	sha   string
	steps *storedSteps
}

// LoadSteps returns one page of the stored resolved steps.
func (a *Activities) LoadSteps(ctx context.Context, in wfapi.LoadStepsInput) (*wfapi.StepsPage, error) {
	id, err := runOf(ctx, "")
	if err == nil {
		in.Ref, err = a.localSteps(ctx, id, in.Ref)
	}
	if err != nil {
		return nil, appError(err)
	}
	st, err := a.readStoredSteps(in.Ref)
	if err != nil {
		return nil, appError(caperr.As(err, caperr.ObservabilityError))
	}
	if in.Page.From < 0 || in.Page.To > len(st.Steps) || in.Page.From > in.Page.To {
		return nil, appError(caperr.New(caperr.InternalError, "page %d-%d is outside the %d stored steps", in.Page.From, in.Page.To, len(st.Steps)))
	}
	page := wfapi.PackSteps(st.Steps[in.Page.From:in.Page.To])
	return &page, nil
}

// planName is a plan value's name, or otherwise.
func planName(v any, otherwise string) string {
	if m, ok := v.(map[string]any); ok {
		if n, ok := m["name"].(string); ok && n != "" {
			return n
		}
	}
	return otherwise
}

// Resolved turns a plan and its preflight report into what the workflow
// executes: per-step tools and effective settings (clamped to policy).
func Resolved(p *plan.Plan, rep *preflight.Report) *wfapi.ResolveResult {
	rr := &wfapi.ResolveResult{
		Status: rep.Status, Message: rep.Message, Plan: p.Name, Description: p.Description, FailurePolicy: p.FailurePolicy,
		Inputs: rep.Inputs, Resolution: gap.WireResolutions(rep.Resolution), Gaps: rep.Gaps, Problems: rep.Problems, Notes: rep.Notes,
		Outputs: p.Outputs, AskTimeout: p.AskTimeout.D(),
	}
	pr := rep.Policy
	rr.Policy = pr.Wire()
	rr.MaxParallel = pr.MaxParallel
	rr.MaxRunSeconds = pr.Limits[policy.MaxRunSeconds]
	maxRetries := -1
	if v, ok := pr.Limits[policy.MaxToolRetries]; ok {
		maxRetries = v
	}
	tools := map[string]*manifest.Manifest{}
	byStep := map[string]gap.StepResolution{}
	cached := map[string]time.Duration{}
	for _, c := range rep.Cache {
		if d, err := time.ParseDuration(c.TTL); err == nil && c.Cached {
			cached[c.Step] = d
		}
	}
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
		if s.Agent != nil {
			rs.Agent = &wfapi.AgentStep{Agent: *s.Agent, OutputSchema: s.OutputSchema, Policy: p.Policy}
			rs.With = map[string]any{wfapi.AgentGoal: s.Agent.Goal}
		}
		if m != nil {
			st = st.Clamp(maxRetries, m.Idempotent)
			r := byStep[s.ID]
			rs.Tool, rs.Version, rs.Digest, rs.Source, rs.TaskQueue, rs.Idempotent = m.Name, m.Version, r.Digest, m.Source, m.TaskQueue, m.Idempotent
			rs.Approval = m.Entrypoint.Type == manifest.EntryBuiltin && builtin.TraitsOf(m.Entrypoint.Name).WaitsForPerson
			rs.Local = m.Local(st.Timeout) && !rs.Approval && s.Plan == "" && !rep.Limited(s.ID)
			rs.Inline = rs.Local && m.Inline() && cached[s.ID] == 0
		}
		rs.StepSettings = st
		rs.CacheTTL = cached[s.ID]
		rs.Summary = rs.Summarize()
		rr.Steps = append(rr.Steps, rs)
	}
	return rr
}
