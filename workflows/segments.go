package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
)

// A run whose history grows long continues as new (docs/limits.md): at
// rr.SegmentEvents events it stops starting steps, lets the running ones
// end, writes their results to a checkpoint and continues with a small
// carry: one letter per step, the outcomes later steps still read, the
// reasons of what did not succeed, the deadline. The next segment reloads
// the resolved steps from the run folder, so no history holds the whole
// plan twice and none passes Temporal's 10,240-event warning.

// maxCarriedReason bounds each reason carried into the next segment (the
// report keeps them whole).
const maxCarriedReason = 300

// loadSteps unpacks the resolved steps the Resolve result carried packed,
// or fetches them page by page when it left them out.
func loadSteps(ctx workflow.Context, rr *wfapi.ResolveResult) error {
	if len(rr.Steps) > 0 || rr.StepsRef == nil || rr.StepsRef.Count == 0 {
		return nil
	}
	if p := rr.PackedSteps; p != nil {
		rr.PackedSteps = nil
		steps, err := p.Unpack()
		if err == nil && len(steps) != rr.StepsRef.Count {
			err = fmt.Errorf("the resolution carried %d steps, want %d", len(steps), rr.StepsRef.Count)
		}
		rr.Steps = steps
		return err
	}
	actx := workflow.WithActivityOptions(ctx, onHost(rr, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute, RetryPolicy: localRetry, Summary: "load the resolved steps",
	}))
	futures := make([]workflow.Future, len(rr.StepsRef.Pages))
	for i, pg := range rr.StepsRef.Pages {
		futures[i] = workflow.ExecuteActivity(actx, wfapi.LoadStepsActivity, wfapi.LoadStepsInput{Ref: *rr.StepsRef, Page: pg})
	}
	steps := make([]wfapi.ResolvedStep, 0, rr.StepsRef.Count)
	for _, f := range futures {
		var page wfapi.StepsPage
		if err := f.Get(ctx, &page); err != nil {
			return err
		}
		unpacked, err := page.Unpack()
		if err != nil {
			return err
		}
		steps = append(steps, unpacked...)
	}
	if len(steps) != rr.StepsRef.Count {
		return fmt.Errorf("loaded %d resolved steps, want %d", len(steps), rr.StepsRef.Count)
	}
	rr.Steps = steps
	return nil
}

// lean is the resolution as it travels after Resolve: without the steps
// and per-step resolution when those are stored (Finalize and the next
// segment read them from the run folder).
func lean(rr *wfapi.ResolveResult, paged bool) *wfapi.ResolveResult {
	if !paged {
		return rr
	}
	c := *rr
	c.Steps, c.Resolution, c.PackedSteps = nil, nil, nil
	return &c
}

// leanStored is the resolution a later segment and a segmented run's
// Finalize get: without the steps when Resolve stored them (they read the
// run folder), whole when they travelled in its result and were never
// stored (a small plan's).
func leanStored(rr *wfapi.ResolveResult) *wfapi.ResolveResult {
	return lean(rr, rr.StepsRef != nil)
}

// resumeFrom puts the scheduler in the state an earlier segment left.
func (s *scheduler) resumeFrom(r *wfapi.Resume) error {
	if len(r.States) != len(s.rr.Steps) {
		return fmt.Errorf("the carried state names %d steps, the plan has %d", len(r.States), len(s.rr.Steps))
	}
	s.segment, s.checkpoints = r.Segment, r.Checkpoints
	s.lostHosts, s.carriedWarnings, s.damage = r.LostHosts, r.LostProcesses, r.Damage
	for _, id := range r.Decided {
		if s.steps[id] != nil {
			s.m.MarkDecided(id)
		}
	}
	if r.Deadline != "" {
		d, err := time.Parse(time.RFC3339Nano, r.Deadline)
		if err != nil {
			return fmt.Errorf("carried deadline: %v", err)
		}
		s.deadline = d
	}
	for i, rs := range s.rr.Steps {
		status, whenFalse, err := wfapi.LetterState(r.States[i])
		if err != nil {
			return err
		}
		if status == wfapi.StepPending {
			continue
		}
		st := s.steps[rs.ID]
		state, err := dag.ParseState(string(status))
		if err != nil {
			return err
		}
		s.m.Restore(rs.ID, state, whenFalse, r.Reasons[rs.ID], r.Codes[rs.ID])
		st.carried, st.host = true, r.Hosts[rs.ID]
		if code, ok := r.Codes[rs.ID]; ok {
			st.env = &envelope.Envelope{Error: envelope.ErrorFor(code)}
		}
		if o, ok := r.Outcomes[rs.ID]; ok {
			st.dataFile, st.dataSHA, st.artifacts = o.DataFile, o.DataSHA256, o.Artifacts
			st.env = &envelope.Envelope{Success: o.Success, Data: o.Data}
		}
	}
	return nil
}

// continuing reports whether this segment ends by continuing as new:
// it drained with steps left to run and nothing stopped the run.
func (s *scheduler) continuing() bool {
	return s.draining && !s.stopped() && s.m.Err() == nil && s.m.Count(dag.Pending) > 0 && s.m.Count(dag.Waiting) == 0 && !s.paused
}

// carry is what the next segment needs.
func (s *scheduler) carry(firstRunID, startedAt string) *wfapi.Resume {
	r := &wfapi.Resume{Segment: s.segment + 1, FirstRunID: firstRunID, StartedAt: startedAt, Resolved: *leanStored(s.rr),
		Reasons: map[string]string{}}
	if !s.deadline.IsZero() {
		r.Deadline = s.deadline.UTC().Format(time.RFC3339Nano)
	}
	r.Reuse = s.reuse
	r.LostHosts, r.LostProcesses, r.Damage = s.lostHosts, s.lostProcesses(), s.damage
	letters := make([]byte, len(s.rr.Steps))
	var reads []any
	for i, rs := range s.rr.Steps {
		st := s.steps[rs.ID]
		state, reason := s.m.State(rs.ID), s.m.Reason(rs.ID)
		letters[i] = wfapi.StateLetter(s.status(rs.ID), s.m.WhenFalse(rs.ID))
		if state == dag.Succeeded && st.host != "" && slices.Contains(s.lostHosts, st.host) {
			if r.Hosts == nil {
				r.Hosts = map[string]string{}
			}
			r.Hosts[rs.ID] = st.host
		}
		switch {
		case state == dag.Pending:
			reads = append(reads, rs.With, rs.ForEach, whenExpr(rs.When))
		case state != dag.Succeeded && reason != "":
			if len(reason) > maxCarriedReason {
				reason = reason[:maxCarriedReason] + "…"
			}
			r.Reasons[rs.ID] = reason
		}
		if state == dag.Failed && st.env != nil && st.env.Error != nil {
			code := st.env.Error.Code
			if code == caperr.RetryExhausted && st.env.Error.Cause != "" {
				code = st.env.Error.Cause
			}
			if r.Codes == nil {
				r.Codes = map[string]caperr.Code{}
			}
			r.Codes[rs.ID] = code
		}
		if s.m.Decided(rs.ID) {
			r.Decided = append(r.Decided, rs.ID)
		}
	}
	r.States = string(letters)
	for _, name := range sortedKeys(s.rr.Outputs) {
		reads = append(reads, s.rr.Outputs[name])
	}
	_, deps := s.referenced(reads...)
	for _, id := range sortedKeys(deps) {
		if s.m.State(id).Terminal() {
			if r.Outcomes == nil {
				r.Outcomes = map[string]wfapi.StepOutcome{}
			}
			r.Outcomes[id] = deps[id]
		}
	}
	return r
}

// ended lists the steps this segment ended, for its checkpoint: without
// the envelopes RunTool stored (the report reads those from disk).
func (s *scheduler) ended() []wfapi.StepResult {
	var out []wfapi.StepResult
	for _, r := range s.results(true) {
		st := s.steps[r.ID]
		if st.carried || !s.m.State(r.ID).Terminal() {
			continue
		}
		if r.EnvelopeFile != "" {
			r.Envelope = nil
		}
		out = append(out, r)
	}
	return out
}
