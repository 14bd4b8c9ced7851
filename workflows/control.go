package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/dag"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/suggest"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// Run control (docs/run-control.md): pause and resume, approvals, and
// operators' decisions on failed steps. Each arrives as a Temporal Update
// whose validator refuses what would change nothing (an unknown step, a
// step that is not waiting, an ended run) before it is recorded.

// waitState is a waiting step's wait.
type waitState struct {
	wfapi.Wait
	cancelTimer workflow.CancelFunc
	// failure is the failed step's message (the reason it keeps when it
	// is skipped, failed or times out).
	failure string
}

// ControlRequest is the pause and resume updates' argument.
type ControlRequest = wfapi.ControlRequest

// registerControl installs the update handlers; sched is nil until the
// run is resolved, and the run is over once res ended.
func registerControl(ctx workflow.Context, sched **scheduler) error {
	running := func() (*scheduler, error) {
		s := *sched
		switch {
		case s == nil:
			return nil, errors.New("the run is not running yet (it is being resolved) or never ran")
		case s.done:
			return nil, errors.New("the run has ended")
		}
		return s, nil
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, wfapi.UpdatePause, func(ctx workflow.Context, req ControlRequest) (wfapi.ControlAnswer, error) {
		s, _ := running()
		return s.pause(req), nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req ControlRequest) error {
		s, err := running()
		if err == nil && s.paused {
			err = fmt.Errorf("the run is already paused (by %s)", s.pausedBy)
		}
		return err
	}})
	if err != nil {
		return err
	}
	err = workflow.SetUpdateHandlerWithOptions(ctx, wfapi.UpdateResume, func(ctx workflow.Context, req ControlRequest) (wfapi.ControlAnswer, error) {
		s, _ := running()
		return s.resume(req), nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req ControlRequest) error {
		s, err := running()
		if err == nil && !s.paused {
			err = errors.New("the run is not paused")
		}
		return err
	}})
	if err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, wfapi.UpdateDecide, func(ctx workflow.Context, req wfapi.DecideRequest) (wfapi.ControlAnswer, error) {
		s, _ := running()
		return s.decideStep(req), nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req wfapi.DecideRequest) error {
		s, err := running()
		if err != nil {
			return err
		}
		return s.validDecision(req)
	}})
}

func (s *scheduler) pause(req ControlRequest) wfapi.ControlAnswer {
	s.paused, s.pausedBy = true, req.By
	s.res.Status = wfapi.StatusPaused
	s.upsert(wfapi.StatusPaused)
	s.wakeUp()
	running := s.m.Count(dag.Running)
	return wfapi.ControlAnswer{Status: wfapi.StatusPaused, Message: fmt.Sprintf("paused by %s: no step or item starts until resume; %d running step(s) finish", req.By, running)}
}

func (s *scheduler) resume(req ControlRequest) wfapi.ControlAnswer {
	s.paused, s.pausedBy = false, ""
	s.res.Status = wfapi.StatusRunning
	s.upsert(wfapi.StatusRunning)
	s.wakeUp()
	return wfapi.ControlAnswer{Status: wfapi.StatusRunning, Message: fmt.Sprintf("resumed by %s: %d step(s) ready to start", req.By, s.m.ReadyCount())}
}

// wakeUp lets the scheduler's loop look again after an update changed
// what may start.
func (s *scheduler) wakeUp() { s.wake.SendAsync(true) }

// validDecision is the decide update's validator.
func (s *scheduler) validDecision(req wfapi.DecideRequest) error {
	st := s.steps[req.Step]
	switch {
	case st == nil:
		return fmt.Errorf("the run has no step %q%s", req.Step, s.stepPhrase(req.Step))
	case req.Check() != nil:
		// A validator's refusal is not in history.
		return req.Check()
	case st.wait == nil:
		return errors.New(wire.NotWaiting(req.Step, s.status(req.Step), st.decisions))
	case !slices.Contains(st.wait.Actions, req.Action):
		return fmt.Errorf("step %s waits for %s: answer with %s, not %q", req.Step, st.wait.Kind, actionList(st.wait.Actions), req.Action)
	}
	return nil
}

// stepPhrase suggests a step id near a mistyped one: a waiting step
// first (what run control answers), else any.
func (s *scheduler) stepPhrase(id string) string {
	var waiting []string
	for _, x := range s.m.IDs() {
		if s.steps[x].wait != nil {
			waiting = append(waiting, x)
		}
	}
	if p := suggest.Phrase(id, waiting); p != "" {
		return p
	}
	return suggest.Phrase(id, s.m.IDs())
}

func actionList(a []wfapi.Action) string {
	var out []string
	for _, x := range a {
		out = append(out, string(x))
	}
	return strings.Join(out, " or ")
}

// decideStep carries out a validated decision.
func (s *scheduler) decideStep(req wfapi.DecideRequest) wfapi.ControlAnswer {
	st := s.steps[req.Step]
	w := st.wait
	w.cancelTimer()
	st.wait = nil
	now := envelope.Timestamp(workflow.Now(s.ctx))
	d := wfapi.Decision{Wait: w.ID, Kind: w.Kind, Action: req.Action, By: req.By, Comment: req.Comment, At: now, Before: st.before}
	st.decisions = append(st.decisions, d)
	data := map[string]any{"approved": req.Action == wfapi.ActionApprove, "by": req.By}
	if req.Comment != "" {
		data["comment"] = req.Comment
	}
	reason := ""
	switch req.Action {
	case wfapi.ActionApprove:
		msg := "approved by " + req.By + commentText(req.Comment)
		st.env = &envelope.Envelope{ToolID: st.step.Tool, Success: true, Timestamp: now, Data: data, Message: msg,
			Feedback: []envelope.Feedback{{Phase: "approve", Level: envelope.LevelInfo, Message: msg, Timestamp: now}}}
	case wfapi.ActionReject:
		st.env = s.synthEnvelope(st.step.Tool, caperr.Rejected, fmt.Sprintf("rejected by %s%s", req.By, commentText(req.Comment)))
		st.env.Data = data
		reason = st.env.Message
	case wfapi.ActionSkip:
		reason = fmt.Sprintf("%s; skipped by %s%s", w.failure, req.By, commentText(req.Comment))
	case wfapi.ActionFail:
		reason = fmt.Sprintf("%s; failed by %s%s", w.failure, req.By, commentText(req.Comment))
	}
	code, cause := errorCodes(st.env)
	if s.m.Decide(st.step.ID, dag.Decision(req.Action), code, cause, reason) {
		st.retries, st.prior = st.retries+1, st.attempts
		if req.Timeout != "" {
			st.timeout, _ = time.ParseDuration(req.Timeout)
		}
		st.env = nil
		s.startOne(st) // a tool's activity again, or an agent's child run
	}
	s.wakeUp()
	return wfapi.ControlAnswer{Status: s.res.Status, Step: req.Step, State: s.status(req.Step), Message: fmt.Sprintf("%s: %s", req.Step, d)}
}

func commentText(c string) string {
	if c == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", c)
}

// endWait ends a wait in a final state and lets its dependents decide.
func (s *scheduler) endWait(st *stepState, to dag.State, reason string) {
	code, cause := errorCodes(st.env)
	s.m.End(st.step.ID, to, code, cause, reason)
}

// await puts a step in the waiting state until a decision or timeout.
func (s *scheduler) await(st *stepState, kind wfapi.WaitKind, prompt string, timeout time.Duration, before, failure string) {
	if timeout <= 0 {
		timeout = s.rr.AskTimeout
	}
	if timeout <= 0 {
		timeout = plan.DefaultAskTimeout
	}
	st.waits++
	now := workflow.Now(s.ctx)
	w := &waitState{Wait: wfapi.Wait{ID: fmt.Sprintf("%s#%d", st.step.ID, st.waits), Kind: kind, Prompt: prompt,
		Since: envelope.Timestamp(now), Until: envelope.Timestamp(now.Add(timeout)), Actions: kind.Actions()}, failure: failure}
	tctx, cancel := workflow.WithCancel(s.ctx)
	w.cancelTimer = cancel
	timer := workflow.NewTimerWithOptions(tctx, timeout, workflow.TimerOptions{Summary: fmt.Sprintf("%s: waiting for %s", st.step.ID, kind)})
	id := w.ID
	s.sel.AddFuture(timer, func(f workflow.Future) {
		if f.Get(s.ctx, nil) != nil || st.wait == nil || st.wait.ID != id {
			return // answered, or the run stopped
		}
		st.wait = nil
		msg := fmt.Sprintf("no decision within %s", timeout)
		if failure != "" {
			msg = failure + "; " + msg
		} else {
			st.env = s.synthEnvelope(st.step.Tool, caperr.TaskTimeout, msg)
		}
		s.endWait(st, dag.Failed, msg)
	})
	st.wait, st.before = w, before
	s.m.Wait(st.step.ID, "waiting for "+string(kind)+": "+prompt)
}

// awaitApproval starts a flow.approve step: it waits in the workflow,
// holding no worker.
func (s *scheduler) awaitApproval(st *stepState) {
	prompt, timeout := "approve?", time.Duration(0)
	scope, _, inHistory := s.historyScope(st.step.With)
	with := st.step.With
	if inHistory {
		// Evaluating references over values in history is pure.
		//workflowcheck:ignore
		if v, err := scope.Eval(st.step.With); err == nil {
			with, _ = v.(map[string]any)
		}
	}
	if p, ok := with["prompt"].(string); ok && p != "" {
		prompt = p
	}
	if t, ok := with["timeout"].(string); ok {
		timeout, _ = time.ParseDuration(t)
	}
	st.started = workflow.Now(s.ctx)
	s.await(st, wfapi.WaitApproval, prompt, timeout, "", "")
}

// asks reports whether a failed step waits for a decision instead of
// failing: on_failure: ask, or a HIGH error under by_severity.
func (s *scheduler) asks(st *stepState) bool {
	if s.stopped() || st.env == nil || st.env.Error == nil || st.env.Error.Code == caperr.Cancelled {
		return false
	}
	return st.step.OnFailure == plan.OnFailureAsk || agentBreach(st) || (s.rr.FailurePolicy == plan.BySeverity && dag.Severity(errorCodes(st.env)) == caperr.High)
}

// awaitDecision makes a failed step wait for retry, skip or fail.
func (s *scheduler) awaitDecision(st *stepState) {
	code := caperr.ToolFailure
	if st.env.Error != nil {
		code = st.env.Error.Code
	}
	s.await(st, wfapi.WaitDecision, fmt.Sprintf("%s failed (%s): %s; retry, skip or fail?", st.step.ID, code, caperr.FirstLine(st.env.Message)), 0,
		fmt.Sprintf("failed %s", code), st.env.Message)
}
