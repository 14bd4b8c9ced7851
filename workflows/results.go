package workflows

import (
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

// results renders the steps in plan order.
func (s *scheduler) results(withEnvelopes bool) []wfapi.StepResult {
	out := make([]wfapi.StepResult, 0, len(s.rr.Steps))
	for _, rs := range s.rr.Steps {
		st := s.steps[rs.ID]
		r := wfapi.StepResult{ID: rs.ID, Capability: rs.Capability, Status: s.status(rs.ID), Tool: rs.Tool, Version: rs.Version,
			Attempts: st.attempts, Reason: s.m.Reason(rs.ID), Critical: rs.Critical, DataFile: st.dataFile, DataSHA256: st.dataSHA, EnvelopeFile: st.envFile,
			InputsSHA256: st.inputsSHA, ReusedFrom: st.reusedFrom, CacheKey: st.cacheKey, CachedFrom: st.cachedFrom, Artifacts: st.artifacts, JoinNote: s.m.JoinNote(rs.ID), Execution: st.path, Agent: st.agent}
		if !st.started.IsZero() {
			r.StartedAt = envelope.Timestamp(st.started)
			if !st.ended.IsZero() {
				r.EndedAt = envelope.Timestamp(st.ended)
				r.DurationMS = st.ended.Sub(st.started).Milliseconds()
			}
		}
		if withEnvelopes && !st.carried && st.env != nil {
			env := *st.env
			r.Envelope = &env
		}
		if st.fe != nil {
			c := itemCounts(st.fe)
			r.ItemCounts, r.Items = &c, itemResults(st.fe)
		}
		r.Child = st.child
		if st.wait != nil {
			w := st.wait.Wait
			r.Waiting = &w
		}
		r.Decisions = st.decisions
		out = append(out, r)
	}
	return out
}

// cachedNote lists the steps that reused a cached result, for the Web
// UI's details ("" when none did).
func cachedNote(steps []wfapi.StepResult) string {
	var b strings.Builder
	n := 0
	for _, st := range steps {
		if st.CachedFrom == "" {
			continue
		}
		if n++; n <= 10 {
			b.WriteString(fmt.Sprintf("\n- %s: cached result of %s (no tool ran)", st.ID, st.CachedFrom))
		}
	}
	if n == 0 {
		return ""
	}
	if n > 10 {
		b.WriteString(fmt.Sprintf("\n- and %d more", n-10))
	}
	return fmt.Sprintf("\n\n%d step(s) from the cache:%s", n, b.String())
}

// details keeps the Web UI's "current details" in step with the run,
// from the machine's counters (no scan of the plan).
func (s *scheduler) details() {
	c := s.m.Count
	done := c(dag.Succeeded) + c(dag.Failed) + c(dag.Skipped) + c(dag.Cancelled)
	text := fmt.Sprintf("**%s**: %d/%d steps done (%d failed, %d skipped), %d running", s.rr.Plan, done, len(s.m.IDs()),
		c(dag.Failed), c(dag.Skipped), c(dag.Running))
	if s.paused {
		text = fmt.Sprintf("**paused** by %s (capflow resume %s)\n\n%s", s.pausedBy, s.workflowID, text)
	}
	if c(dag.Waiting) > 0 {
		// Rare and few: a scan is fine here.
		for _, id := range s.m.IDs() {
			if w := s.steps[id].wait; w != nil {
				text += fmt.Sprintf("\n\n- %s waiting for %s: %s", id, w.Kind, w.Prompt)
			}
		}
	}
	workflow.SetCurrentDetails(s.ctx, text)
}

// referenced collects what the given values reference: the plan inputs and
// the outcomes of earlier steps. Only that travels with an activity:
// history grows with every activity input, so a 500-step fan-out must not
// carry the plan's inputs 500 times.
func (s *scheduler) referenced(values ...any) (map[string]any, map[string]wfapi.StepOutcome) {
	var inputs map[string]any
	var deps map[string]wfapi.StepOutcome
	addInput := func(name string) {
		if v, ok := s.rr.Inputs[name]; ok {
			if inputs == nil {
				inputs = map[string]any{}
			}
			inputs[name] = v
		}
	}
	addStep := func(id string, withData bool) {
		ds := s.steps[id]
		if ds == nil {
			return
		}
		if deps == nil {
			deps = map[string]wfapi.StepOutcome{}
		}
		o := deps[id]
		o.Status = s.status(id)
		o.Success = o.Status == wfapi.StepSucceeded
		if o.Success && withData {
			var data any
			if ds.env != nil {
				data = ds.env.Data
			}
			o = wfapi.Succeeded(data, ds.dataFile, ds.dataSHA, ds.artifacts, true)
		}
		deps[id] = o
	}
	for _, v := range values {
		if when, ok := v.(whenExpr); ok {
			// Parsing a condition is pure; the step ids come back sorted.
			//workflowcheck:ignore
			for _, id := range plan.WhenSteps(string(when)) {
				addStep(id, true)
			}
			for _, name := range sortedKeys(s.rr.Inputs) {
				addInput(name)
			}
			continue
		}
		plan.EachRef(v, addInput, addStep)
	}
	return inputs, deps
}

// whenExpr marks a condition among the values passed to referenced: a
// condition reads whole steps and any input.
type whenExpr string

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	// Collecting keys to sort them is order-independent.
	//workflowcheck:ignore
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// traceNote names the run's trace in its Web UI details.
func traceNote(id string) string {
	if id == "" {
		return ""
	}
	return "\n\ntrace `" + id + "`"
}
