package wfapi

import "fmt"

// Run control (docs/run-control.md): Temporal Updates on a running
// PlanWorkflow, each checked by a validator before anything changes.
const (
	UpdatePause  = "pause"
	UpdateResume = "resume"
	UpdateDecide = "decide"
)

// StepWaiting is a step waiting for a person: a flow.approve step, or a
// failed step under on_failure: ask (or a HIGH error under by_severity).
const StepWaiting StepState = "waiting"

// StatusPaused is a run that starts nothing until resumed.
const StatusPaused RunStatus = "paused"

// WaitKind says what a waiting step waits for.
type WaitKind string

// What a step can wait for.
const (
	WaitApproval WaitKind = "approval"
	WaitDecision WaitKind = "decision" // after a failure
)

// Action is an operator's answer to a waiting step.
type Action string

// Actions: approve/reject answer an approval; retry/skip/fail a failure.
const (
	ActionApprove Action = "approve"
	ActionReject  Action = "reject"
	ActionRetry   Action = "retry"
	ActionSkip    Action = "skip"
	ActionFail    Action = "fail"
)

// Actions lists what answers a wait of this kind.
func (k WaitKind) Actions() []Action {
	if k == WaitApproval {
		return []Action{ActionApprove, ActionReject}
	}
	return []Action{ActionRetry, ActionSkip, ActionFail}
}

// Wait is what a waiting step waits for (in the result and progress).
type Wait struct {
	// ID names this wait: a step may wait more than once (fail, retry,
	// fail again); a decision answers one wait.
	ID     string   `json:"id"`
	Kind   WaitKind `json:"kind"`
	Prompt string   `json:"prompt"`
	Since  string   `json:"since"`
	Until  string   `json:"until"`
	// Actions are the answers the step takes.
	Actions []Action `json:"actions"`
}

// DecideRequest is the decide update's argument.
type DecideRequest struct {
	Step    string `json:"step"`
	Action  Action `json:"action"`
	Comment string `json:"comment,omitempty"`
	By      string `json:"by"`
	// Timeout (retry only) replaces the step's start-to-close timeout
	// for the retried attempt ("extend"), as a Go duration.
	Timeout string `json:"timeout,omitempty"`
}

// Decision is a decision as recorded on its step (result and report).
type Decision struct {
	Wait    string   `json:"wait"`
	Kind    WaitKind `json:"kind"`
	Action  Action   `json:"action"`
	By      string   `json:"by"`
	Comment string   `json:"comment,omitempty"`
	At      string   `json:"at"`
	// Before is what the step had come to when it started waiting
	// ("failed TOOL_FAILURE").
	Before string `json:"before,omitempty"`
}

// String is the decision as the report tells it.
func (d Decision) String() string {
	s := fmt.Sprintf("%sd by %s at %s", d.Action, d.By, d.At)
	if d.Action == ActionRetry || d.Action == ActionSkip || d.Action == ActionFail {
		s = fmt.Sprintf("%s by %s at %s", map[Action]string{ActionRetry: "retried", ActionSkip: "skipped", ActionFail: "failed"}[d.Action], d.By, d.At)
	}
	if d.Before != "" {
		s = d.Before + " → " + s
	}
	if d.Comment != "" {
		s += fmt.Sprintf(" (%q)", d.Comment)
	}
	return s
}

// ControlAnswer is what every run-control update answers: what changed.
type ControlAnswer struct {
	Status  RunStatus `json:"status"`
	Step    string    `json:"step,omitempty"`
	State   StepState `json:"state,omitempty"`
	Message string    `json:"message"`
}
