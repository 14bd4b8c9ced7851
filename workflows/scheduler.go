package workflows

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
)

type stepState struct {
	step     wfapi.ResolvedStep
	status   wfapi.StepState
	attempts int
	reason   string
	env      *envelope.Envelope
	dataFile string
	dataSHA  string
	// reruns counts re-runs of this step to re-create a stored output a
	// consumer found missing or altered.
	reruns  int
	started time.Time
	ended   time.Time
	cancel  workflow.CancelFunc
	future  workflow.Future
	// whenFalse: skipped because its condition was false; such a step is
	// left out of its dependents' joins.
	whenFalse bool
	// fe is the state of a for_each step's items (nil for other steps).
	fe *forEach
	// child is a sub-plan step's child run.
	child *wfapi.ChildRun
	// carried: the step ended in an earlier segment of the run (its
	// detail is in that segment's checkpoint).
	carried bool
	// envFile is where RunTool stored the envelope.
	envFile string
	// Run control (control.go): the current wait, how many there were,
	// the decisions made, what the step had come to when it began waiting,
	// retries ordered by operators (with their timeout, when extended).
	wait              *waitState
	waits             int
	decisions         []wfapi.Decision
	before            string
	retries           int
	timeout           time.Duration
	skippedByDecision bool
	// inputsSHA and reusedFrom: see wfapi.RunToolResult.
	inputsSHA  string
	reusedFrom string
	joinNote   string
	// host is the host queue its activity last ran on; moves counts the
	// times it was sent to another host after its own was lost.
	host  string
	moves int
	// path is how the step ran: local, activity, or local then activity.
	path string
}

type scheduler struct {
	ctx        workflow.Context
	rr         *wfapi.ResolveResult
	res        *wfapi.Result
	ids        []string // sorted
	steps      map[string]*stepState
	dependents map[string][]string
	sel        workflow.Selector
	ready      []string // dependencies done and join satisfied, waiting for a slot; sorted
	// work lists running for_each steps that have items left to start.
	work  []string
	count map[wfapi.StepState]int
	// inflight counts activities running (steps, items, decisions): the
	// plan's max_parallel bounds it.
	inflight int
	// timerPending is true while the max_run_seconds timer is unresolved.
	timerPending bool
	stopped      bool
	stopReason   string
	cancelled    bool
	timedOut     bool
	err          error // an invalid transition: a bug, surfaced loudly
	// deadline is when max_run_seconds runs out (zero: no limit).
	deadline time.Time
	// segment counts the times the run continued as new; draining is set
	// once the history reached rr.SegmentEvents: no step starts, the
	// running ones end, and the run continues as new.
	segment  int
	draining bool
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
	// rehosting: a Host activity is looking for another host for the
	// local: the run uses local activities (local.go); localDone local
	// steps ended since the workflow task whose history length is seenLen.
	local     bool
	localDone int
	seenLen   int
	// steps in moving; lostHosts are the hosts the run left.
	rehosting bool
	moving    []string
	lostHosts []string
	// carriedWarnings: lost-process warnings of earlier segments.
	carriedWarnings []string
	// baseSize is the history size when the segment's DAG began.
	baseSize int
}

func newScheduler(ctx workflow.Context, rr *wfapi.ResolveResult, res *wfapi.Result) *scheduler {
	s := &scheduler{ctx: ctx, rr: rr, res: res, steps: map[string]*stepState{}, dependents: map[string][]string{}, local: usesLocal(ctx),
		sel: workflow.NewSelector(ctx), count: map[wfapi.StepState]int{}, wake: workflow.NewBufferedChannel(ctx, 64), upsert: func(wfapi.RunStatus) {}}
	s.sel.AddReceive(s.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
	// A cancellation must rouse a loop that only waits for an operator (a
	// paused run, a waiting step): nothing else would resolve.
	workflow.Go(ctx, func(gctx workflow.Context) {
		gctx.Done().Receive(gctx, nil)
		s.wakeUp()
	})
	for _, st := range rr.Steps {
		s.steps[st.ID] = &stepState{step: st, status: wfapi.StepPending}
		s.ids = append(s.ids, st.ID)
		s.count[wfapi.StepPending]++
		for _, d := range st.Deps {
			s.dependents[d] = append(s.dependents[d], st.ID)
		}
	}
	sort.Strings(s.ids)
	for _, id := range s.ids {
		sort.Strings(s.dependents[id])
	}
	if rr.MaxRunSeconds > 0 {
		s.deadline = workflow.Now(ctx).Add(time.Duration(rr.MaxRunSeconds) * time.Second)
	}
	return s
}

func (s *scheduler) move(st *stepState, to wfapi.StepState, reason string) {
	if err := checkTransition(st.step.ID, st.status, to); err != nil {
		workflow.GetLogger(s.ctx).Error("scheduler bug", "error", err)
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.count[st.status]--
	s.count[to]++
	st.status = to
	if reason != "" {
		st.reason = reason
	}
	if to.Terminal() {
		st.ended = workflow.Now(s.ctx)
		m := workflow.GetMetricsHandler(s.ctx).WithTags(map[string]string{"status": string(to), "capability": st.step.Capability})
		m.Counter(wfapi.MetricStepsEnded).Inc(1)
		if !st.started.IsZero() {
			m.Timer(wfapi.MetricStepDuration).Record(st.ended.Sub(st.started))
		}
	}
}

// run drives the DAG until nothing runs and nothing can start. It is
// event driven: one long-lived selector gets each activity future once,
// and only the dependents of a finished step are re-examined, so a
// workflow task costs O(affected steps), not O(plan).
func (s *scheduler) run() {
	s.baseSize = workflow.GetInfo(s.ctx).GetCurrentHistorySize()
	var stopTimer workflow.CancelFunc
	if !s.deadline.IsZero() {
		tctx, cancel := workflow.WithCancel(s.ctx)
		stopTimer = cancel
		// At least a millisecond: a segment that starts past the deadline
		// times out at once.
		left := max(s.deadline.Sub(workflow.Now(s.ctx)), time.Millisecond)
		deadline := workflow.NewTimerWithOptions(tctx, left,
			workflow.TimerOptions{Summary: fmt.Sprintf("max_run_seconds %d", s.rr.MaxRunSeconds)})
		s.sel.AddFuture(deadline, func(f workflow.Future) {
			s.timerPending = false
			if f.Get(s.ctx, nil) == nil {
				s.timedOut = true
				s.stop(fmt.Sprintf("max_run_seconds (%ds) exceeded", s.rr.MaxRunSeconds))
			}
		})
		s.timerPending = true
	}
	for _, id := range s.ids {
		s.examine(id)
	}
	for {
		s.flushLocal()
		if !s.draining && s.segmentFull() {
			// Let what runs end, then continue as new (segments.go).
			s.draining = true
		}
		switch {
		case s.stopped, s.paused:
		case s.draining:
			s.startItems()
		default:
			s.startReady()
		}
		if stopTimer != nil && s.inflight == 0 && s.count[wfapi.StepWaiting] == 0 && !s.paused {
			// No step runs and none can start: the deadline timer is all
			// that is left. Cancel it; its future resolves and ends the loop.
			stopTimer()
			stopTimer = nil
		}
		s.details()
		if s.active() == 0 {
			break
		}
		s.sel.Select(s.ctx)
		if s.ctx.Err() != nil && !s.cancelled {
			// Cancelling the run cancels every activity context (children
			// of the workflow's); their futures resolve as the tools stop.
			s.cancelled = true
			s.stop("the run was cancelled")
		}
	}
}

// active counts what the selector can still deliver: running steps, the
// deadline timer, and an operator's update while a step waits or the
// paused run has steps left to start.
func (s *scheduler) active() int {
	n := s.inflight
	if s.timerPending {
		n++
	}
	if s.count[wfapi.StepWaiting] > 0 || (s.paused && !s.stopped && (s.count[wfapi.StepPending] > 0 || len(s.work) > 0)) {
		n++
	}
	return n
}

// full reports whether the plan's max_parallel is reached.
func (s *scheduler) full() bool { return s.rr.MaxParallel > 0 && s.inflight >= s.rr.MaxParallel }

// counts returns how many of a step's dependencies succeeded, ended
// otherwise, and are not finished; dependencies skipped by a false
// condition count in none (they are left out of the join).
func (s *scheduler) counts(st *stepState) (succ, bad, open int) {
	for _, d := range st.step.Deps {
		ds := s.steps[d]
		switch {
		case ds.whenFalse:
		case ds.status == wfapi.StepSucceeded:
			succ++
		case ds.status == wfapi.StepPending || ds.status == wfapi.StepRunning || ds.status == wfapi.StepWaiting:
			open++
		default:
			bad++
		}
	}
	return
}

// required is how many dependencies must succeed, over those that count
// (a join over only steps skipped by their condition is satisfied).
func (s *scheduler) required(st *stepState) int {
	var deps []string
	for _, d := range st.step.Deps {
		if !s.steps[d].whenFalse {
			deps = append(deps, d)
		}
	}
	p := plan.Step{Join: st.step.Join, Deps: deps}
	n := p.Required()
	if n > len(deps) {
		n = len(deps)
	}
	return n
}

// examine decides a pending step: skip it when its join can no longer be
// satisfied (and examine its dependents in turn), queue it when all its
// dependencies ended with the join satisfied.
func (s *scheduler) examine(id string) {
	work := []string{id}
	for len(work) > 0 {
		id, work = work[0], work[1:]
		st := s.steps[id]
		if st.status != wfapi.StepPending || s.stopped {
			continue
		}
		succ, bad, open := s.counts(st)
		need := s.required(st)
		switch {
		case succ+open < need:
			reason := s.skipReason(st, need)
			if p := st.step.Join.Policy; p == plan.JoinAny || p == plan.JoinQuorum {
				st.env = s.synthEnvelope(st.step.Tool, caperr.QuorumNotMet, "skipped: "+reason)
			}
			s.move(st, wfapi.StepSkipped, reason)
			s.checkStop()
			work = append(work, s.dependents[id]...)
		case open == 0 && succ >= need:
			if p := st.step.Join.Policy; p == plan.JoinAny || p == plan.JoinQuorum {
				total := succ + bad
				st.joinNote = fmt.Sprintf("%s: %d/%d (%d%%) met, continuing", p, succ, total, succ*100/max(total, 1))
			}
			i := sort.SearchStrings(s.ready, id)
			if i == len(s.ready) || s.ready[i] != id {
				s.ready = append(s.ready, "")
				copy(s.ready[i+1:], s.ready[i:])
				s.ready[i] = id
			}
		}
	}
}

// startReady starts queued steps in id order, then items of running
// for_each steps, up to max_parallel.
func (s *scheduler) startReady() {
	for len(s.ready) > 0 && !s.stopped {
		if s.full() {
			return
		}
		id := s.ready[0]
		s.ready = s.ready[1:]
		if st := s.steps[id]; st.status == wfapi.StepPending {
			s.begin(st)
		}
	}
	s.startItems()
}

// begin starts a ready step: its condition first, then its items (a
// for_each step) or its one activity.
func (s *scheduler) begin(st *stepState) {
	if s.rehome(st) {
		return
	}
	step := st.step
	if step.ForEach != nil || step.When != "" {
		if step.ForEach == nil {
			if run, ok := s.evalWhen(st); ok {
				if !run {
					s.skipWhenFalse(st)
					return
				}
				s.startOne(st)
				return
			}
		} else if list, ok := step.ForEach.([]any); ok && step.When == "" {
			s.move(st, wfapi.StepRunning, "")
			st.started = workflow.Now(s.ctx)
			s.expand(st, &wfapi.DecideResult{Run: true, Count: len(list)})
			return
		}
		s.decide(st)
		return
	}
	s.startOne(st)
}

// startOne starts a step that is one unit of work: a tool's activity, or
// a sub-plan's child workflow.
func (s *scheduler) startOne(st *stepState) {
	if st.step.Approval {
		s.awaitApproval(st)
		return
	}
	if st.step.Plan != "" {
		s.startChild(st)
		return
	}
	s.start(st)
}

func (s *scheduler) skipReason(st *stepState, need int) string {
	var bad []string
	for _, d := range st.step.Deps {
		if ds := s.steps[d].status; ds != wfapi.StepSucceeded && ds != wfapi.StepPending && ds != wfapi.StepRunning && ds != wfapi.StepWaiting && !s.steps[d].whenFalse {
			bad = append(bad, d+" "+string(ds))
		}
	}
	return fmt.Sprintf("join %s needs %d of %d dependencies to succeed; %s", st.step.Join.Policy, need, len(st.step.Deps), strings.Join(bad, ", "))
}

func (s *scheduler) start(st *stepState) {
	s.launch(st)
	st.started = workflow.Now(s.ctx)
	s.move(st, wfapi.StepRunning, "")
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
	cctx, cancel := workflow.WithCancel(s.ctx)
	in := wfapi.RunToolInput{WorkflowID: s.res.WorkflowID, RunDir: s.rr.RunDir,
		Step: wfapi.StepCall{ID: step.ID, Tool: step.Tool, Version: step.Version, Digest: step.Digest, Idempotent: step.Idempotent, With: step.With}}
	// Only idempotent steps are reused: a step with effects (a server it
	// starts, a card it charges) runs again.
	if s.reuse != nil && !s.noReuse[step.ID] && st.reruns == 0 && st.retries == 0 && step.Idempotent {
		in.Step.ReuseFrom = s.reuse.WorkflowID
	}
	in.Inputs, in.Deps = s.referenced(step.With)
	st.future = s.runTool(cctx, step, opts, in, &st.path)
	st.cancel = cancel
	id := step.ID
	s.sel.AddFuture(st.future, func(f workflow.Future) { s.complete(id, f) })
}

// activityOptions are a step's (or item's) activity options: its timeouts
// and retry policy, its readable summary.
func (s *scheduler) activityOptions(step wfapi.ResolvedStep) workflow.ActivityOptions {
	// No heartbeat timeout unless the tool or plan asks for one: each
	// one costs the server a timer per activity (measured: a 500-step
	// fan-out ran 1.3-1.5x slower than a minimal workflow with a 10s
	// default, 1.02x without). RunTool heartbeats anyway, so cancellation
	// still reaches running tools within seconds.
	hb := step.Heartbeat
	if hb > step.Timeout && step.Timeout > 0 {
		hb = step.Timeout
	}
	opts := workflow.ActivityOptions{
		ActivityID:          "step-" + step.ID,
		TaskQueue:           step.TaskQueue,
		StartToCloseTimeout: step.Timeout,
		HeartbeatTimeout:    hb,
		WaitForCancellation: true,
		Summary:             step.Summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: step.InitialInterval, BackoffCoefficient: step.Backoff, MaximumInterval: step.MaxInterval,
			MaximumAttempts: int32(step.MaxAttempts), NonRetryableErrorTypes: caperr.NonRetryable(),
		},
	}
	return onHost(s.rr, opts)
}

// HostWait bounds how long an activity waits for a worker on the run's
// host: past it the host is taken as lost and the step fails, naming it.
const HostWait = 15 * time.Minute

// onHost sends an activity to the run's host queue (one host per run: its
// folder and its processes are there) unless its tool names a queue.
func onHost(rr *wfapi.ResolveResult, o workflow.ActivityOptions) workflow.ActivityOptions {
	if rr != nil && rr.HostQueue != "" && o.TaskQueue == "" {
		o.TaskQueue, o.ScheduleToStartTimeout = rr.HostQueue, HostWait
		if rr.HostWait > 0 {
			o.ScheduleToStartTimeout = rr.HostWait
		}
	}
	return o
}

// complete records a finished activity.
func (s *scheduler) complete(id string, f workflow.Future) {
	s.inflight--
	st := s.steps[id]
	var out wfapi.RunToolResult
	err := f.Get(s.ctx, &out)
	defer func() {
		for _, d := range s.dependents[id] {
			s.examine(d)
		}
	}()
	if err == nil {
		env := out.Envelope
		st.env, st.dataFile, st.dataSHA, st.attempts, st.envFile = &env, out.DataFile, out.DataSHA256, int(out.Attempt), out.EnvelopeFile
		st.inputsSHA, st.reusedFrom = out.InputsSHA256, out.ReusedFrom
		s.move(st, wfapi.StepSucceeded, "")
		return
	}
	lost := s.failure(st, err)
	if len(lost) > 0 && s.recreate(st, lost) {
		return
	}
	if s.hostLost(err) && st.step.Idempotent && !s.stopped && !s.cancelled {
		if st.host != s.rr.HostQueue {
			// Scheduled on a host the run already left: run it where the
			// run is now (after what it needs from the lost host).
			st.env, st.moves = nil, st.moves+1
			if !s.rehome(st) {
				s.launch(st)
			}
			return
		}
		s.moveHost(st)
		return
	}
	if st.env.Error != nil && st.env.Error.Code == caperr.Cancelled && (s.cancelled || s.stopped) {
		s.move(st, wfapi.StepCancelled, s.stopReason)
		return
	}
	if s.cancelled || (s.stopped && st.env.Error != nil && st.env.Error.Code == caperr.Cancelled) {
		s.move(st, wfapi.StepCancelled, s.stopReason)
		return
	}
	if s.asks(st) {
		s.awaitDecision(st)
		return
	}
	s.endFailed(st, st.env.Message)
}

// endFailed ends a running step that failed: skipped instead under
// on_failure: skip; then the failure policy decides what else stops.
func (s *scheduler) endFailed(st *stepState, why string) {
	if st.step.OnFailure == plan.OnFailureSkip {
		s.move(st, wfapi.StepSkipped, "failed ("+why+"); on_failure: skip")
		s.checkStop()
		return
	}
	s.move(st, wfapi.StepFailed, why)
	s.checkStop()
}

// failure decodes a failed activity into the step's envelope and its true
// attempt count: from the tool's own envelope when the activity returned
// one, from the last heartbeat after a timeout, and from the server's
// retry state when retries ran out (then the step's code is
// RETRY_EXHAUSTED, the last attempt's code kept as its cause).
func (s *scheduler) failure(st *stepState, err error) (lostData []string) {
	st.attempts, st.envFile = 0, ""
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &canceled):
		// Pointers: a local activity's error may carry its details as Go
		// values (not payloads), which only a pointer receives.
		var details *wfapi.RunToolResult
		if canceled.HasDetails() && canceled.Details(&details) == nil && details != nil {
			st.attempts = int(details.Attempt)
		}
		reason := s.stopReason
		if reason == "" {
			reason = "the step was cancelled"
		}
		st.env = s.synthEnvelope(st.step.Tool, caperr.Cancelled, "cancelled: "+reason)
	case errors.As(err, &app):
		var details *wfapi.RunToolResult
		if app.HasDetails() && app.Details(&details) == nil && details != nil && details.Envelope.ToolID != "" {
			env := details.Envelope
			st.env, st.attempts, lostData, st.envFile = &env, int(details.Attempt), details.LostData, details.EnvelopeFile
		} else {
			st.env = s.synthEnvelope(st.step.Tool, caperr.Code(app.Type()), app.Message())
		}
	case errors.As(err, &timeout):
		var hb wfapi.Heartbeat
		if timeout.HasLastHeartbeatDetails() && timeout.LastHeartbeatDetails(&hb) == nil && hb.Attempt > 0 {
			st.attempts = int(hb.Attempt)
		}
		msg := fmt.Sprintf("%s timed out (%s)", st.step.ID, strings.ToLower(timeout.TimeoutType().String()))
		if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			msg = fmt.Sprintf("%s: no worker on the run's host (%s) took it within %s: that host is lost", st.step.ID, s.rr.HostQueue, HostWait)
		}
		st.env = s.synthEnvelope(st.step.Tool, caperr.TaskTimeout, msg)
	default:
		st.env = s.synthEnvelope(st.step.Tool, caperr.ToolFailure, err.Error())
	}
	var act *temporal.ActivityError
	exhausted := errors.As(err, &act) && act.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
	if act != nil && act.RetryState() == enumspb.RETRY_STATE_UNSPECIFIED {
		// The test server does not always say; the attempt count does.
		exhausted = st.attempts >= st.step.MaxAttempts && st.env.Error != nil && st.env.Error.Retryable
	}
	if exhausted {
		st.attempts = max(st.attempts, st.step.MaxAttempts)
	}
	if st.attempts == 0 {
		// It was scheduled and ended: its first attempt at least (a
		// cancelled RunTool reports its own attempt in the details).
		st.attempts = 1
	}
	if exhausted && st.step.MaxAttempts > 1 && st.env.Error != nil {
		cause := st.env.Error.Code
		st.env.Error = envelope.ErrorFor(caperr.RetryExhausted)
		st.env.Error.Cause = cause
		st.env.ExitCode = max(st.env.ExitCode, 1)
		st.env.Feedback = append(st.env.Feedback, envelope.Feedback{Phase: "retry", Level: envelope.LevelError,
			Message: fmt.Sprintf("retries exhausted after %d attempts; last error %s", st.attempts, cause), Detail: string(caperr.RetryExhausted),
			Timestamp: envelope.Timestamp(workflow.Now(s.ctx))})
	}
	return lostData
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
	if s.stopped {
		return false
	}
	for _, id := range lost {
		p := s.steps[id]
		if p == nil || p.status != wfapi.StepSucceeded || !p.step.Idempotent || p.reruns >= maxReruns {
			return false
		}
	}
	consumer.env = nil
	s.move(consumer, wfapi.StepPending, "waiting for "+strings.Join(lost, ", ")+" to re-create its stored output")
	for _, id := range lost {
		p := s.steps[id]
		p.reruns++
		p.dataFile, p.dataSHA, p.carried = "", "", false
		workflow.GetLogger(s.ctx).Warn("re-running a step whose stored output was lost", "step", id, "consumer", consumer.step.ID)
		s.move(p, wfapi.StepPending, "re-run: its stored output was missing or altered")
		s.start(p)
	}
	return true
}

// synthEnvelope is an envelope the workflow writes itself (cancelled and
// timed-out steps, skipped joins), stamped with workflow time.
func (s *scheduler) synthEnvelope(tool string, code caperr.Code, msg string) *envelope.Envelope {
	if tool == "" {
		tool = "capflow"
	}
	ts := envelope.Timestamp(workflow.Now(s.ctx))
	info := caperr.Lookup(code)
	return &envelope.Envelope{ToolID: tool, ExitCode: max(info.ExitCode, 1), Success: false, Timestamp: ts, Message: msg,
		Feedback: []envelope.Feedback{{Phase: "run", Level: envelope.LevelError, Message: msg, Detail: string(code), Timestamp: ts}},
		Error:    envelope.ErrorFor(code)}
}

// absorbed reports whether a failed (or skipped) step's failure is
// tolerated: under critical_path when it is not critical; otherwise when
// every step that needs it has an any/quorum join that can still be, or
// was, satisfied.
func (s *scheduler) absorbed(st *stepState) bool {
	if st.status == wfapi.StepSkipped && (st.step.OnFailure == plan.OnFailureSkip || st.skippedByDecision) {
		return true
	}
	if s.rr.FailurePolicy == plan.BySeverity && st.status == wfapi.StepFailed {
		if sev := severity(st); sev == caperr.Medium || sev == caperr.Low {
			return true // a warning (docs/run-control.md)
		}
	}
	if s.rr.FailurePolicy == plan.CriticalPath && !st.step.Critical {
		return true
	}
	deps := s.dependents[st.step.ID]
	if len(deps) == 0 {
		return false
	}
	for _, d := range deps {
		ds := s.steps[d]
		if ds.step.Join.Policy != plan.JoinAny && ds.step.Join.Policy != plan.JoinQuorum {
			return false
		}
		if ds.status == wfapi.StepSkipped && !ds.whenFalse {
			return false
		}
		// A dependent its own condition skipped still had its join met
		// (or not): a when: false is never a failure.
		succ, _, open := s.counts(ds)
		if (ds.status == wfapi.StepPending || ds.whenFalse) && succ+open < s.required(ds) {
			return false
		}
	}
	return true
}

// unabsorbed lists the failures that decide the run.
func (s *scheduler) unabsorbed() []string {
	var out []string
	for _, id := range s.ids {
		st := s.steps[id]
		switch {
		case st.status == wfapi.StepFailed && !s.absorbed(st):
			out = append(out, id)
		case s.rr.FailurePolicy == plan.CriticalPath && st.step.Critical && st.status == wfapi.StepSkipped && !st.whenFalse:
			out = append(out, id)
		}
	}
	return out
}

// checkStop applies fail_fast and critical_path after each failure.
func (s *scheduler) checkStop() {
	if s.stopped || s.rr.FailurePolicy == plan.ContinueAll {
		return
	}
	if bad := s.unabsorbed(); len(bad) > 0 {
		what := "failed"
		if st := s.steps[bad[0]]; st.status == wfapi.StepSkipped {
			what = "was skipped"
		}
		s.stop(fmt.Sprintf("%s: step %s %s", s.rr.FailurePolicy, bad[0], what))
	}
}

// stop cancels running steps and skips the pending ones.
func (s *scheduler) stop(reason string) {
	if s.stopped {
		return
	}
	s.stopped, s.stopReason = true, reason
	for _, id := range s.ids {
		st := s.steps[id]
		switch st.status {
		case wfapi.StepWaiting:
			st.wait.cancelTimer()
			st.wait = nil
			s.move(st, wfapi.StepCancelled, "stopped while waiting: "+reason)
		case wfapi.StepRunning:
			if st.fe != nil {
				s.abandonItems(st, reason)
				continue
			}
			if st.cancel != nil {
				st.cancel()
			}
		case wfapi.StepPending:
			to := wfapi.StepSkipped
			if s.cancelled {
				to = wfapi.StepCancelled
			}
			s.move(st, to, "not started: "+reason)
		}
	}
}

// outcome is the run's status and message.
func (s *scheduler) outcome() (wfapi.RunStatus, string) {
	if s.err != nil {
		return wfapi.StatusFailed, "internal error: " + s.err.Error()
	}
	if s.cancelled {
		return wfapi.StatusCancelled, "the run was cancelled"
	}
	done := 0
	for _, id := range s.ids {
		if s.steps[id].status == wfapi.StepSucceeded {
			done++
		}
	}
	if s.timedOut {
		return wfapi.StatusFailed, fmt.Sprintf("max_run_seconds (%ds) exceeded; %d of %d steps succeeded", s.rr.MaxRunSeconds, done, len(s.ids))
	}
	if bad := s.unabsorbed(); len(bad) > 0 {
		st := s.steps[bad[0]]
		why := st.reason
		return wfapi.StatusFailed, fmt.Sprintf("step %s %s: %s (%d of %d steps succeeded)", bad[0], st.status, why, done, len(s.ids))
	}
	if done == len(s.ids) {
		return wfapi.StatusPassed, fmt.Sprintf("all %d steps succeeded", done)
	}
	skippedByWhen := 0
	for _, id := range s.ids {
		if s.steps[id].whenFalse {
			skippedByWhen++
		}
	}
	if done+skippedByWhen == len(s.ids) {
		return wfapi.StatusPassed, fmt.Sprintf("all %d steps that ran succeeded; %d skipped by their condition", done, skippedByWhen)
	}
	return wfapi.StatusPassed, fmt.Sprintf("%d of %d steps succeeded; every failure was absorbed", done, len(s.ids))
}

// results renders the steps in plan order.
func (s *scheduler) results(withEnvelopes bool) []wfapi.StepResult {
	out := make([]wfapi.StepResult, 0, len(s.rr.Steps))
	for _, rs := range s.rr.Steps {
		st := s.steps[rs.ID]
		r := wfapi.StepResult{ID: rs.ID, Capability: rs.Capability, Status: st.status, Tool: rs.Tool, Version: rs.Version,
			Attempts: st.attempts, Reason: st.reason, Critical: rs.Critical, DataFile: st.dataFile, DataSHA256: st.dataSHA, EnvelopeFile: st.envFile,
			InputsSHA256: st.inputsSHA, ReusedFrom: st.reusedFrom, JoinNote: st.joinNote, Execution: st.path}
		if !st.started.IsZero() {
			r.StartedAt = envelope.Timestamp(st.started)
			if !st.ended.IsZero() {
				r.EndedAt = envelope.Timestamp(st.ended)
				r.DurationMS = st.ended.Sub(st.started).Milliseconds()
			}
		}
		if withEnvelopes && !st.carried {
			r.Envelope = st.env
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

// details keeps the Web UI's "current details" in step with the run,
// from counters kept by move (no scan of the plan).
func (s *scheduler) details() {
	done := s.count[wfapi.StepSucceeded] + s.count[wfapi.StepFailed] + s.count[wfapi.StepSkipped] + s.count[wfapi.StepCancelled]
	text := fmt.Sprintf("**%s**: %d/%d steps done (%d failed, %d skipped), %d running", s.rr.Plan, done, len(s.ids),
		s.count[wfapi.StepFailed], s.count[wfapi.StepSkipped], s.count[wfapi.StepRunning])
	if s.paused {
		text = fmt.Sprintf("**paused** by %s (capflow resume %s)\n\n%s", s.pausedBy, s.res.WorkflowID, text)
	}
	if s.count[wfapi.StepWaiting] > 0 {
		// Rare and few: a scan is fine here.
		for _, id := range s.ids {
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
	addStep := func(id string, withData bool) {
		ds := s.steps[id]
		if ds == nil {
			return
		}
		if deps == nil {
			deps = map[string]wfapi.StepOutcome{}
		}
		o := deps[id]
		o.Success, o.Status = ds.status == wfapi.StepSucceeded, ds.status
		if o.Success && withData {
			o.DataFile, o.DataSHA256 = ds.dataFile, ds.dataSHA
			if ds.env != nil && ds.dataFile == "" {
				o.Data = ds.env.Data
			}
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
				if inputs == nil {
					inputs = map[string]any{}
				}
				inputs[name] = s.rr.Inputs[name]
			}
			continue
		}
		plan.CollectRefs(v, nil, func(_ []string, tpl plan.Template, err error) {
			if err != nil {
				return
			}
			for _, r := range tpl.Refs() {
				switch r.Kind {
				case plan.RefInputs:
					if v, ok := s.rr.Inputs[r.Name]; ok {
						if inputs == nil {
							inputs = map[string]any{}
						}
						inputs[r.Name] = v
					}
				case plan.RefSteps:
					addStep(r.Name, r.Field == "data")
				}
			}
		})
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
		work = append(work, s.dependents[id]...)
	}
}
