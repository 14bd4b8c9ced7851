package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/defaults"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
)

// dispatcher sends one unit of work of a step (the step, or one of its
// for_each items) to the step executor, the way chooseWay picks (ways.go),
// and decodes how it ended. PlanWorkflow's scheduler and ItemsWorkflow
// share it: the activity options, the ways and the reading of failures
// are written once.
type dispatcher struct {
	ctx        workflow.Context
	rr         *wfapi.ResolveResult // the run's host queue and folder (they move with the run)
	workflowID string               // the run's (its folder)
	p          profile              // how the run's steps run (versions.go)
	ways       ways
	// seenLen is the history length of the workflow task the ways count
	// in (task.go).
	seenLen int
	// deadline is when the run's max_run_seconds runs out (zero: none),
	// kept here alone; deadlineV is the version of clamping steps to it the
	// run recorded (deadline-clamp: a run from before is not clamped).
	deadline  time.Time
	deadlineV int
	// lineage: see wfapi.RunToolInput.Lineage.
	lineage string
	// leave, when set, is told a unit's wait leaves the workflow task: a
	// local attempt goes on as a regular one, or the task yields
	// (outside.go).
	leave func()
	// follow, when set, names the steps a batch of inline steps may
	// evaluate after its own (ahead.go).
	follow func(ids []string) []wfapi.InlineFollow
}

// withinDeadline clamps an activity's timeouts to what is left of the
// run's time, so a step cannot outlive the run's budget. A local step
// gets exactly what is left, its retries included: no timer interrupts it
// within its workflow task. A regular one gets deadlineGrace more for
// each attempt: the run's timer cancels it first (a cancelled step, its
// tool told to stop, its retries stopped), the clamp is the backstop. A
// regular activity gets no schedule-to-close timeout: the server would
// keep a timer for it beside the start-to-close one (and a schedule-to-
// start one derived from it), a write on every step for nothing the
// run's own timer does not do.
func (e *dispatcher) withinDeadline(o workflow.ActivityOptions, local bool) workflow.ActivityOptions {
	deadline := e.clampTo()
	if deadline.IsZero() {
		return o
	}
	left := max(deadline.Sub(workflow.Now(e.ctx)), time.Millisecond)
	if !local {
		left += deadlineGrace
	}
	if o.StartToCloseTimeout == 0 || o.StartToCloseTimeout > left {
		o.StartToCloseTimeout = left
	}
	if local {
		o.ScheduleToCloseTimeout = left
	}
	return o
}

const deadlineGrace = 10 * time.Second

// pastDeadline reports whether the run's max_run_seconds ran out, or is
// within slack of it (a timeout set to the deadline may be reported a
// moment before workflow time reaches it).
func (e *dispatcher) pastDeadline(slack time.Duration) bool {
	deadline := e.clampTo()
	return !deadline.IsZero() && !workflow.Now(e.ctx).Add(slack).Before(deadline)
}

// clampTo is the deadline steps are clamped to: none in a run recorded
// before they were (deadline-clamp version 0).
func (e *dispatcher) clampTo() time.Time {
	if e.deadlineV < 1 {
		return time.Time{}
	}
	return e.deadline
}

func newDispatcher(ctx workflow.Context, rr *wfapi.ResolveResult, workflowID string) dispatcher {
	return dispatcher{ctx: ctx, rr: rr, workflowID: workflowID, p: newProfile(rr.RunSettings, usesLocal(ctx)), lineage: lineageOf(ctx)}
}

// withLineage records the run's lineage in ctx: its parent's for a
// sub-plan (or a batch), else its chain's first run ID.
func withLineage(ctx workflow.Context, parents string) workflow.Context {
	if parents == "" {
		parents = workflow.GetInfo(ctx).FirstRunID
	}
	return workflow.WithValue(ctx, lineageKey{}, parents)
}

type lineageKey struct{}

// lineageOf is what withLineage recorded.
func lineageOf(ctx workflow.Context) string {
	l, _ := ctx.Value(lineageKey{}).(string)
	return l
}

// activityOptions are a step's (or item's) activity options: its timeouts
// and retry policy, its readable summary.
func (e *dispatcher) activityOptions(step wfapi.ResolvedStep) workflow.ActivityOptions {
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
		RetryPolicy:         stepRetry(step),
	}
	return onHost(e.rr, opts)
}

// itemOptions are the options of one item of a for_each step.
func (e *dispatcher) itemOptions(step wfapi.ResolvedStep, index int) workflow.ActivityOptions {
	opts := e.activityOptions(step)
	label := wfapi.ItemLabel(step.ID, index)
	opts.ActivityID = "step-" + label
	opts.Summary = wfapi.StepSummary(label, step.Capability, step.Tool, step.Version)
	return opts
}

// HostWait bounds how long an activity waits for a worker on the run's
// host when the run recorded no host wait of its own (runs recorded before
// it was): past it the host is taken as lost and the step fails, naming it.
const HostWait = defaults.HostWait

// onHost sends an activity to the run's host queue (one host per run: its
// folder and its processes are there) unless its tool names a queue.
func onHost(rr *wfapi.ResolveResult, o workflow.ActivityOptions) workflow.ActivityOptions {
	if rr != nil && rr.HostQueue != "" && o.TaskQueue == "" {
		o.TaskQueue, o.ScheduleToStartTimeout = rr.HostQueue, hostWait(rr)
	}
	return o
}

// hostWait is the run's host wait: the one it recorded, else HostWait.
func hostWait(rr *wfapi.ResolveResult) time.Duration {
	if rr != nil && rr.HostWait > 0 {
		return rr.HostWait
	}
	return HostWait
}

// outcome is how one unit of work ended, decoded from its activity.
type outcome struct {
	env      *envelope.Envelope
	attempts int
	envFile  string
	// lost names producers whose stored output the step found missing.
	lost []string
}

// decode reads a failed activity: the tool's own envelope when the
// activity returned one, the last heartbeat after a timeout, the server's
// retry state when retries ran out (then the code is RETRY_EXHAUSTED, the
// last attempt's code kept as its cause). why says why a cancelled unit
// was cancelled.
func (e *dispatcher) decode(step wfapi.ResolvedStep, err error, why string) outcome {
	o := e.decodeError(step, err, why)
	var act *temporal.ActivityError
	exhausted := errors.As(err, &act) && act.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
	if act == nil || act.RetryState() == enumspb.RETRY_STATE_UNSPECIFIED {
		// The test server does not always say, nor a local step's timeout
		// (localTimeout); the attempt count does.
		exhausted = o.env.Error != nil && exhaustedBy(o.attempts, step.MaxAttempts, o.env.Error.Retryable)
	}
	if exhausted {
		o.attempts = max(o.attempts, step.MaxAttempts)
	}
	if o.attempts == 0 {
		// It was scheduled and ended: its first attempt at least (a
		// cancelled RunTool reports its own attempt in the details).
		o.attempts = 1
	}
	if exhausted && step.MaxAttempts > 1 && o.env.Error != nil {
		cause := o.env.Error.Code
		o.env.Error = envelope.ErrorFor(caperr.RetryExhausted)
		o.env.Error.Cause = cause
		o.env.ExitCode = max(o.env.ExitCode, 1)
		o.env.Feedback = append(o.env.Feedback, envelope.Feedback{Phase: "retry", Level: envelope.LevelError,
			Message: fmt.Sprintf("retries exhausted after %d attempts; last error %s", o.attempts, cause), Detail: string(caperr.RetryExhausted),
			Timestamp: envelope.Timestamp(workflow.Now(e.ctx))})
	}
	return o
}

func (e *dispatcher) decodeError(step wfapi.ResolvedStep, err error, why string) outcome {
	var o outcome
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &canceled):
		// Pointers: a local activity's error may carry its details as Go
		// values (not payloads), which only a pointer receives.
		var details *wfapi.RunToolResult
		if canceled.HasDetails() && canceled.Details(&details) == nil && details != nil {
			o.attempts = int(details.Attempt)
		}
		if why == "" {
			why = "the step was cancelled"
		}
		o.env = e.synthEnvelope(step.Tool, caperr.Cancelled, "cancelled: "+why)
	case errors.As(err, &app):
		var details *wfapi.RunToolResult
		if app.HasDetails() && app.Details(&details) == nil && details != nil && details.Envelope.ToolID != "" {
			env := details.Envelope
			o.env, o.attempts, o.lost, o.envFile = &env, int(details.Attempt), details.LostData, details.EnvelopeFile
		} else {
			o.env = e.synthEnvelope(step.Tool, caperr.Code(app.Type()), app.Message())
		}
	case errors.As(err, &timeout):
		var hb wfapi.Heartbeat
		if timeout.HasLastHeartbeatDetails() && timeout.LastHeartbeatDetails(&hb) == nil && hb.Attempt > 0 {
			o.attempts = int(hb.Attempt)
		}
		msg := timedOut(step, timeout.TimeoutType(), hb)
		switch {
		case e.pastDeadline(time.Second):
			msg = fmt.Sprintf("%s timed out: the run's max_run_seconds (%ds) ran out", step.ID, e.rr.MaxRunSeconds)
		case timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
			msg = fmt.Sprintf("%s: no worker on the run's host (%s) took it within %s: that host is lost", step.ID, e.rr.HostQueue, hostWait(e.rr))
		}
		o.env = e.synthEnvelope(step.Tool, caperr.TaskTimeout, msg)
		if len(hb.Lines) > 0 {
			// Its last stderr lines, as its heartbeat carried them: what
			// a person reads first of a step that hung.
			o.env.Feedback = append(o.env.Feedback, envelope.Feedback{Phase: "stderr", Level: envelope.LevelInfo, Message: "stderr tail (its last heartbeat's)",
				Detail: strings.Join(hb.Lines, "\n"), Timestamp: o.env.Timestamp})
		}
	default:
		o.env = e.synthEnvelope(step.Tool, caperr.ToolFailure, err.Error())
	}
	if e.pastDeadline(time.Second) && o.env.Error != nil && o.env.Error.Code == caperr.TaskTimeout && !strings.Contains(o.env.Message, "max_run_seconds") {
		// The step's time was the run's: say so.
		env := *o.env
		env.Message += fmt.Sprintf(" (the run's max_run_seconds, %ds, ran out)", e.rr.MaxRunSeconds)
		o.env = &env
	}
	return o
}

// timedOut says what a step's timeout was: which one, how long, the
// attempt, and the last thing the step said (its last heartbeat's
// feedback).
func timedOut(step wfapi.ResolvedStep, kind enumspb.TimeoutType, hb wfapi.Heartbeat) string {
	attempt := ""
	if hb.Attempt > 0 {
		attempt = fmt.Sprintf("attempt %d of %d ", hb.Attempt, max(hb.MaxAttempts, int32(step.MaxAttempts), hb.Attempt))
	}
	var msg string
	switch kind {
	case enumspb.TIMEOUT_TYPE_HEARTBEAT:
		msg = fmt.Sprintf("%s timed out: %ssent no heartbeat for %s, its heartbeat timeout (its worker may be gone, or the tool hung)", step.ID, attempt, step.Heartbeat)
	case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
		msg = fmt.Sprintf("%s timed out: %sran for %s, its timeout", step.ID, attempt, step.Timeout)
	default:
		msg = fmt.Sprintf("%s timed out (%s)", step.ID, strings.ToLower(kind.String()))
	}
	if hb.Latest != nil && hb.Latest.Message != "" {
		msg += "; its last feedback: " + caperr.FirstLine(hb.Latest.Message)
	}
	return msg
}

// synthEnvelope is an envelope the workflow writes itself (cancelled and
// timed-out steps, skipped joins), stamped with workflow time.
func (e *dispatcher) synthEnvelope(tool string, code caperr.Code, msg string) *envelope.Envelope {
	if tool == "" {
		tool = "capflow"
	}
	ts := envelope.Timestamp(workflow.Now(e.ctx))
	info := caperr.Lookup(code)
	return &envelope.Envelope{ToolID: tool, ExitCode: max(info.ExitCode, 1), Success: false, Timestamp: ts, Message: msg,
		Feedback: []envelope.Feedback{{Phase: "run", Level: envelope.LevelError, Message: msg, Detail: string(code), Timestamp: ts}},
		Error:    envelope.ErrorFor(code)}
}

// errorCodes are an envelope's error code and its cause ("" when none).
func errorCodes(env *envelope.Envelope) (code, cause caperr.Code) {
	if env == nil || env.Error == nil {
		return "", ""
	}
	return env.Error.Code, env.Error.Cause
}
