package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/internal/wftrace"
	"github.com/capflow/capflow/wire"
)

// The scheduler drives the run's state machine (internal/dag) with
// Temporal: the machine says which steps are ready, skipped or to be
// halted, and how the run ends; the scheduler starts activities, child
// workflows and timers for it and reports back what they did
// (docs/architecture.md).

// stepState is what the driver keeps of a step beside its state in the
// machine: the running work, its envelope and stored output, its times,
// its operators' waits, its host.
type stepState struct {
	step     wfapi.ResolvedStep
	attempts int
	env      *envelope.Envelope
	dataFile string
	dataSHA  string
	envFile  string
	// reruns counts re-runs of this step to re-create a stored output a
	// consumer found missing or altered.
	reruns  int
	started time.Time
	ended   time.Time
	cancel  workflow.CancelFunc
	// fe is the state of a for_each step's items (nil for other steps).
	fe *forEach
	// child is a sub-plan step's child run.
	child *wfapi.ChildRun
	// agent is an agent step's rounds; agentAt where a retry goes on from.
	agent   *wire.AgentRun
	agentAt *wfapi.AgentResume
	// carried: the step ended in an earlier segment of the run (its
	// detail is in that segment's checkpoint).
	carried bool
	// Run control (control.go): the current wait, how many there were,
	// the decisions made, what the step had come to when it began waiting,
	// retries ordered by operators (with their timeout, when extended) and
	// the attempts made before the last of them (the count shown adds
	// them: issue 54).
	wait      *waitState
	waits     int
	decisions []wfapi.Decision
	before    string
	retries   int
	timeout   time.Duration
	prior     int
	// inputsSHA, reusedFrom, cacheKey, cachedFrom and artifacts: see
	// wfapi.RunToolResult.
	inputsSHA, reusedFrom, cacheKey, cachedFrom string
	artifacts                                   []wfapi.Artifact
	// host is the host queue its activity last ran on; moves counts the
	// times it was sent to another host after its own was lost.
	host  string
	moves int
	// path is how the step ran: local, activity, or local then activity.
	path string
	// graceCancel stops the wait for a halted activity's confirmation;
	// abandoned: the step ended without it (cancelgrace.go).
	graceCancel workflow.CancelFunc
	abandoned   bool
	// toolActive: its tool's activity is in flight (launched, not yet
	// complete).
	toolActive bool
}

type scheduler struct {
	dispatcher
	m     *dag.Machine
	res   *wfapi.Result
	steps map[string]*stepState
	sel   workflow.Selector
	// work lists running for_each steps that have items left to start.
	work []string
	// inflight counts activities running (steps, items, decisions): the
	// plan's max_parallel bounds it.
	inflight int
	// timerPending is true while the max_run_seconds timer is unresolved;
	// stopDeadline cancels it (nil: none runs).
	timerPending bool
	timedOut     bool
	stopDeadline workflow.CancelFunc
	// lazy: the run waits to go outside its workflow task before it starts
	// its timer and upserts its status (outside.go); leaving: a unit left
	// the task; awaiting: the tool units' paths in flight until then.
	lazy, outside, leaving bool
	awaiting               map[*string]struct{}
	// segment counts the times the run continued as new; draining is set
	// once the history is full (segments.go): no step starts, the running
	// ones end, and the run continues as new.
	segment  int
	draining bool
	// baseSize is the history size when the segment's DAG began;
	// checkpoints are the earlier segments' stored steps.
	baseSize    int
	checkpoints []wfapi.Blob
	// paused: no step or item starts (control.go); wake lets an update
	// rouse the loop; done: the DAG ended, updates are refused.
	paused   bool
	pausedBy string
	wake     workflow.Channel
	done     bool
	upsert   func(wfapi.RunStatus)
	// reuse: a rerun's earlier run; noReuse: its From step and everything
	// downstream of it, which run again whatever they did there.
	reuse   *wfapi.Reuse
	noReuse map[string]bool
	// Host failover (hosts.go): rehosting while a Host activity looks for
	// another host for the steps in moving; lostHosts are the hosts the
	// run left; carriedWarnings: lost-process warnings of earlier segments.
	rehosting       bool
	moving          []string
	movingItems     []itemRef
	lostHosts       []string
	carriedWarnings []string
	// damage: stored outputs consumers found missing or altered, and what
	// the run did (noteDamage), carried across segments.
	damage []string
}

func newScheduler(ctx workflow.Context, rr *wfapi.ResolveResult, res *wfapi.Result) *scheduler {
	s := &scheduler{dispatcher: newDispatcher(ctx, rr, res.WorkflowID), res: res, steps: map[string]*stepState{},
		sel: newCompactSelector(ctx), wake: workflow.NewBufferedChannel(ctx, 64), upsert: func(wfapi.RunStatus) {}}
	s.sel.AddReceive(s.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
	s.follow = s.followers
	// A cancellation must rouse a loop that only waits for an operator (a
	// paused run, a waiting step): nothing else would resolve.
	workflow.Go(ctx, func(gctx workflow.Context) {
		gctx.Done().Receive(gctx, nil)
		s.wakeUp()
	})
	nodes := make([]dag.Step, 0, len(rr.Steps))
	for _, st := range rr.Steps {
		s.steps[st.ID] = &stepState{step: st}
		nodes = append(nodes, dag.Step{ID: st.ID, Deps: st.Deps, Join: st.Join, OnFailure: st.OnFailure, Critical: st.Critical})
	}
	s.m = dag.New(nodes, rr.FailurePolicy, s)
	if rr.MaxRunSeconds > 0 {
		s.deadline = workflow.Now(ctx).Add(time.Duration(rr.MaxRunSeconds) * time.Second)
		s.deadlineV = int(versionOf(ctx, changeDeadline))
	}
	return s
}

// Moved stamps a step that ended and counts it (dag.Effects).
func (s *scheduler) Moved(t dag.Transition) {
	st := s.steps[t.ID]
	if t.Code != "" {
		st.env = s.synthEnvelope(st.step.Tool, t.Code, "skipped: "+t.Reason)
	}
	if !t.To.Terminal() {
		return
	}
	st.ended = workflow.Now(s.ctx)
	m := workflow.GetMetricsHandler(s.ctx).WithTags(map[string]string{"status": t.To.String(), "capability": st.step.Capability})
	m.Counter(wfapi.MetricStepsEnded).Inc(1)
	if !st.started.IsZero() {
		m.Timer(wfapi.MetricStepDuration).Record(st.ended.Sub(st.started))
	}
	s.traceStep(st, t.To)
}

// stepCtx is the scheduler's context with the step's trace span as the
// parent of what the step starts.
func (s *scheduler) stepCtx(id string) workflow.Context {
	return wftrace.StepContext(s.ctx, id, s.steps[id].reruns)
}

// traceStep exports the span of a step that ended (wftrace).
func (s *scheduler) traceStep(st *stepState, to dag.State) {
	start := st.started
	if start.IsZero() {
		start = st.ended
	}
	code, cause := errorCodes(st.env)
	msg := ""
	if st.env != nil && st.env.Error != nil {
		msg = st.env.Message
	}
	tool := st.step.Tool
	if st.step.Version != "" {
		tool += "@" + st.step.Version
	}
	wftrace.EndStep(s.ctx, wftrace.Step{ID: st.step.ID, Run: st.reruns, Capability: st.step.Capability, Tool: tool, Status: to.String(),
		Code: string(code), Cause: string(cause), Message: msg, Attempts: st.attempts, Path: st.path, Start: start, End: st.ended})
}

// Halt stops a running or waiting step of a run that stopped (dag.Effects).
func (s *scheduler) Halt(id string, was dag.State) {
	st := s.steps[id]
	switch {
	case was == dag.Waiting:
		st.wait.cancelTimer()
		st.wait = nil
	case st.fe != nil:
		s.abandonItems(st, s.stopReason())
	case st.cancel != nil:
		st.cancel()
		s.confirmCancel(st)
	}
}

// status is a step's state as the wire names it.
func (s *scheduler) status(id string) wfapi.StepState { return wfapi.StepState(s.m.State(id).String()) }

func (s *scheduler) stopped() bool { ok, _ := s.m.Stopped(); return ok }

func (s *scheduler) stopReason() string { _, why := s.m.Stopped(); return why }

// run drives the DAG until nothing runs and nothing can start. It is
// event driven: one long-lived selector gets each activity future once,
// and only the dependents of a finished step are re-examined, so a
// workflow task costs O(affected steps), not O(plan).
func (s *scheduler) run() {
	s.baseSize = workflow.GetInfo(s.ctx).GetCurrentHistorySize()
	if !s.lazy {
		s.stopDeadline = s.startDeadline()
	}
	s.m.Examine(s.m.IDs()...)
	for {
		s.flushLocal()
		if s.pastDeadline(0) && !s.timedOut {
			// Local steps move workflow time within one task, where the
			// deadline timer's firing cannot arrive: the run checks.
			s.timedOut = true
			s.m.Stop(s.timeoutText())
		}
		if !s.draining && s.segmentFull() {
			// Let what runs end, then continue as new (segments.go).
			s.draining = true
		}
		switch {
		case s.stopped(), s.paused:
		case s.draining:
			s.startItems()
		default:
			s.startReady()
		}
		// Before anything blocks: every started inline step has its result
		// handed on (then what became ready starts) or its local activity.
		// A cancellation that came while they waited is the run's first.
		if len(s.ways.inline.pending) > 0 && s.ctx.Err() != nil && !s.m.Cancelled() {
			s.m.CancelRun("the run was cancelled")
		}
		if s.settle(s.sel) {
			continue
		}
		if s.stopDeadline != nil && s.idle() {
			// No step runs and none can start: the deadline timer is all
			// that is left. Cancel it; its future resolves and ends the loop.
			s.stopDeadline()
			s.stopDeadline = nil
		}
		s.goOutside()
		s.details()
		if s.active() == 0 {
			break
		}
		s.sel.Select(s.ctx)
		if s.ctx.Err() != nil && !s.m.Cancelled() {
			// Cancelling the run cancels every activity context (children
			// of the workflow's); their futures resolve as the tools stop.
			s.m.CancelRun("the run was cancelled")
		}
	}
}

// startDeadline starts the max_run_seconds timer; it returns its cancel
// (nil without a limit).
func (s *scheduler) startDeadline() workflow.CancelFunc {
	if s.deadline.IsZero() {
		return nil
	}
	tctx, cancel := workflow.WithCancel(s.ctx)
	// At least a millisecond: a segment that starts past the deadline
	// times out at once.
	left := max(s.deadline.Sub(workflow.Now(s.ctx)), time.Millisecond)
	deadline := workflow.NewTimerWithOptions(tctx, left,
		workflow.TimerOptions{Summary: fmt.Sprintf("max_run_seconds %d", s.rr.MaxRunSeconds)})
	s.sel.AddFuture(deadline, func(f workflow.Future) {
		s.timerPending = false
		if f.Get(s.ctx, nil) == nil && !s.timedOut {
			s.timedOut = true
			s.m.Stop(s.timeoutText())
		}
	})
	s.timerPending = true
	return cancel
}

func (s *scheduler) timeoutText() string {
	return fmt.Sprintf("max_run_seconds (%ds) exceeded", s.rr.MaxRunSeconds)
}

// active counts what the selector can still deliver: running steps, the
// deadline timer, and an operator's update while a step waits or the
// paused run has steps left to start.
func (s *scheduler) active() int {
	n := s.inflight
	if s.timerPending {
		n++
	}
	if s.m.Count(dag.Waiting) > 0 || (s.paused && !s.stopped() && (s.m.Count(dag.Pending) > 0 || len(s.work) > 0)) {
		n++
	}
	return n
}

// full reports whether the plan's max_parallel is reached.
func (s *scheduler) full() bool { return s.rr.MaxParallel > 0 && s.inflight >= s.rr.MaxParallel }

// held reports whether no more work may start now: max_parallel is
// reached, or this workflow task's inline steps used its budget (the run
// yields once what runs has been seen).
func (s *scheduler) held() bool { return s.full() || (s.inflight > 0 && s.inlineDue()) }

// startReady starts queued steps in id order, then items of running
// for_each steps, up to max_parallel.
func (s *scheduler) startReady() {
	s.ways.eager.spend(&s.dispatcher, s.m.ReadyCount())
	for s.m.ReadyCount() > 0 && !s.stopped() {
		if s.held() {
			return
		}
		if id, ok := s.m.NextReady(); ok {
			s.begin(s.steps[id])
		}
	}
	s.startItems()
}

// begin starts a ready step: its condition first, then its items (a
// for_each step) or its one unit of work.
func (s *scheduler) begin(st *stepState) {
	if s.rehome(st) {
		return
	}
	step := st.step
	switch {
	case kindOf(step) != kindItems && step.When == "":
		s.startOne(st)
	case kindOf(step) != kindItems:
		if run, ok := s.evalWhen(st); ok {
			if run {
				s.startOne(st)
			}
			return
		}
		s.evaluate(st)
	default:
		if list, ok := step.ForEach.([]any); ok && step.When == "" {
			s.m.Start(step.ID)
			st.started = workflow.Now(s.ctx)
			s.expand(st, &wfapi.EvaluateResult{Run: true, Count: len(list)})
			return
		}
		s.evaluate(st)
	}
}

// startOne starts a step that is one unit of work: a gate, a sub-plan's
// child run, or a tool's RunTool.
func (s *scheduler) startOne(st *stepState) {
	switch kindOf(st.step) {
	case kindApproval:
		s.awaitApproval(st)
	case kindPlan, kindAgent:
		s.startChild(st)
	default:
		s.start(st)
	}
}

// outcome is the run's status and message.
func (s *scheduler) outcome() (wfapi.RunStatus, string) {
	if err := s.m.Err(); err != nil {
		workflow.GetLogger(s.ctx).Error("scheduler bug", "error", err)
	}
	timeout := ""
	if s.timedOut {
		timeout = s.timeoutText()
	}
	v, msg := s.m.Outcome(timeout)
	return wfapi.RunStatus(v.String()), msg
}
