package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/wfapi"
)

// A step that is one tool's activity: started, completed, and re-run when
// a consumer found its stored output lost.

func (s *scheduler) start(st *stepState) {
	s.launch(st)
	st.started = workflow.Now(s.ctx)
	s.m.Start(st.step.ID)
}

// launch runs a step's activity (start, or again on another host).
func (s *scheduler) launch(st *stepState) {
	s.inflight++
	step := st.step
	opts := s.activityOptions(step)
	if st.reruns > 0 {
		opts.ActivityID = fmt.Sprintf("step-%s-rerun-%d", step.ID, st.reruns)
	}
	if st.retries > 0 {
		// Retried by an operator: a new activity, maybe with a longer timeout.
		opts.ActivityID = fmt.Sprintf("step-%s-retry-%d", step.ID, st.retries)
		if st.timeout > 0 {
			opts.StartToCloseTimeout = st.timeout
		}
	}
	if st.moves > 0 {
		opts.ActivityID += fmt.Sprintf("-host-%d", st.moves)
	}
	st.host = opts.TaskQueue // the run's host, or the tool's own queue
	cctx, cancel := workflow.WithCancel(s.stepCtx(step.ID))
	in := s.fitInput(s.toolInput(st))
	// After fitInput: runs recorded without these measured without them.
	in.Lineage, in.Retry = s.lineage, st.retries
	f := s.runTool(cctx, step, opts, in, &st.path)
	s.ways.inline.forget(step.ID)
	st.cancel, st.toolActive = cancel, true
	id := step.ID
	s.awaitTool(s.sel, f, &st.path, func(f workflow.Future) { s.complete(id, f) })
}

// toolInput is a step's RunTool input as launch builds it before
// fitInput: its call and what its with references.
func (s *scheduler) toolInput(st *stepState) wfapi.RunToolInput {
	step := st.step
	in := wfapi.RunToolInput{WorkflowID: s.workflowID, RunDir: s.rr.RunDir, Step: wfapi.CallOf(step)}
	// Only idempotent steps are reused: a step with effects (a server it
	// starts, a card it charges) runs again.
	if s.reuse != nil && !s.noReuse[step.ID] && st.reruns == 0 && st.retries == 0 && step.Idempotent {
		in.Step.ReuseFrom = s.reuse.WorkflowID
	}
	in.Inputs, in.Deps = s.referenced(step.With)
	return in
}

// complete records a finished activity.
func (s *scheduler) complete(id string, f workflow.Future) {
	st := s.steps[id]
	if !s.confirmed(st) {
		return
	}
	s.inflight--
	var out wfapi.RunToolResult
	err := f.Get(s.ctx, &out)
	if err == nil {
		env := out.Envelope
		st.env, st.dataFile, st.dataSHA, st.attempts, st.envFile = &env, out.DataFile, out.DataSHA256, st.prior+int(out.Attempt), out.EnvelopeFile
		st.inputsSHA, st.reusedFrom, st.cacheKey, st.cachedFrom, st.artifacts = out.InputsSHA256, out.ReusedFrom, out.CacheKey, out.CachedFrom, out.Artifacts
		s.m.Succeed(id)
		return
	}
	o := s.decode(st.step, err, s.stopReason())
	st.env, st.attempts, st.envFile = o.env, st.prior+o.attempts, o.envFile
	if len(o.lost) > 0 {
		s.noteDamage(st, o.lost)
	}
	switch {
	case len(o.lost) > 0 && s.recreate(st, o.lost):
	case s.hostLost(err) && st.step.Idempotent && !s.stopped():
		s.followHost(st)
	case s.hostSilent(st.step, err, st.moves):
		s.followHost(st)
	case s.m.Cancelled() || (s.stopped() && st.env.Error != nil && st.env.Error.Code == caperr.Cancelled):
		s.m.Cancel(id, s.stopReason())
	case s.asks(st):
		s.awaitDecision(st)
	default:
		s.fail(st, st.env.Message)
	}
}

// fail ends a step that failed with its envelope's codes.
func (s *scheduler) fail(st *stepState, why string) {
	code, cause := errorCodes(st.env)
	s.m.Fail(st.step.ID, code, cause, why)
}

// maxReruns bounds how often one producer is re-run to re-create its
// stored output (a file that keeps vanishing is a fault to report).
const maxReruns = 2

// recreate handles a consumer that found a producer's stored output
// missing or altered (docs/workflow.md): when
// every such producer is idempotent and may still be re-run, they run
// again and the consumer waits for them; otherwise the consumer's
// OBSERVABILITY_ERROR, which names the file, stands.
func (s *scheduler) recreate(consumer *stepState, lost []string) bool {
	if !s.canRecreate(lost) {
		return false
	}
	consumer.env = nil
	s.m.Requeue(consumer.step.ID, "waiting for "+strings.Join(lost, ", ")+" to re-create its stored output")
	for _, id := range lost {
		p := s.steps[id]
		p.reruns++
		p.dataFile, p.dataSHA, p.carried = "", "", false
		workflow.GetLogger(s.ctx).Warn("re-running a step whose stored output was lost", "step", id, "consumer", consumer.step.ID)
		s.m.Requeue(id, "re-run: its stored output was missing or altered")
		s.start(p)
	}
	return true
}

// noteDamage says, in the run's result and report, what a consumer found
// of its producers' stored outputs and what the run does about it: they
// run again (recreate), or the consumer fails naming the file.
func (s *scheduler) noteDamage(consumer *stepState, lost []string) {
	found := "a stored output it reads was missing or altered"
	if consumer.env != nil {
		found = consumer.env.Message
	}
	done := fmt.Sprintf("%s failed (a producer is not idempotent, or was re-run %d times already)", consumer.step.ID, maxReruns)
	if s.canRecreate(lost) {
		done = fmt.Sprintf("%s ran again and %s waited for it", strings.Join(lost, ", "), consumer.step.ID)
	}
	s.damage = append(s.damage, fmt.Sprintf("%s: %s; %s", consumer.step.ID, found, done))
}

// canRecreate reports whether every lost producer may run again.
func (s *scheduler) canRecreate(lost []string) bool {
	if s.stopped() {
		return false
	}
	for _, id := range lost {
		p := s.steps[id]
		if p == nil || s.m.State(id) != dag.Succeeded || !p.step.Idempotent || p.reruns >= maxReruns {
			return false
		}
	}
	return true
}

// setReuse makes a rerun reuse what succeeded in an earlier run, except
// its From step and what lies downstream of it.
func (s *scheduler) setReuse(r *wfapi.Reuse) {
	if r == nil || r.WorkflowID == "" {
		return
	}
	s.reuse, s.noReuse = r, map[string]bool{}
	if s.steps[r.From] == nil {
		return
	}
	work := []string{r.From}
	for len(work) > 0 {
		id := work[0]
		work = work[1:]
		if s.noReuse[id] {
			continue
		}
		s.noReuse[id] = true
		work = append(work, s.m.Dependents(id)...)
	}
}
