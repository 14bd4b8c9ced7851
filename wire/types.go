package wire

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/capflow/capflow/defaults"
)

// The wire types of a capflow run: what a client sends (Input), what a run
// answers (Result, through its result and the progress query) and the
// run-control updates (docs/workflow.md, docs/run-control.md). They are
// defined here, once; the worker maps its own domain types to them. Plain
// JSON: a client in another language reads the same shapes
// (schemas/workflow-result.schema.json).

// Names registered with Temporal, for clients in other languages too.
const (
	WorkflowType  = "PlanWorkflow"
	ProgressQuery = "progress"
	// AgentQuery answers an agent step's rounds so far (its child run's).
	AgentQuery   = "agent-rounds"
	UpdatePause  = "pause"
	UpdateResume = "resume"
	UpdateDecide = "decide"
	// DefaultTaskQueue is the task queue workers poll unless configured.
	DefaultTaskQueue = defaults.TaskQueue
)

// RunStatus is a run's status.
type RunStatus string

// Run statuses.
const (
	StatusResolving       RunStatus = "resolving"
	StatusRunning         RunStatus = "running"
	StatusPaused          RunStatus = "paused"
	StatusPassed          RunStatus = "passed"
	StatusFailed          RunStatus = "failed"
	StatusPartialComplete RunStatus = "partial-complete" // the plan has gaps: nothing ran
	StatusBlockedByPolicy RunStatus = "blocked_by_policy"
	StatusInvalid         RunStatus = "invalid"
	StatusCancelled       RunStatus = "cancelled"
)

// RunStatuses are every run status, in the order a run meets them.
var RunStatuses = []RunStatus{StatusResolving, StatusRunning, StatusPaused, StatusPassed, StatusFailed,
	StatusPartialComplete, StatusBlockedByPolicy, StatusInvalid, StatusCancelled}

// Ended reports whether a run with this status is over.
func (s RunStatus) Ended() bool {
	return s != StatusResolving && s != StatusRunning && s != StatusPaused
}

// StepState is a step's state.
type StepState string

// Step states.
const (
	StepPending   StepState = "pending"
	StepRunning   StepState = "running"
	StepWaiting   StepState = "waiting" // for an approval or a decision on its failure
	StepSucceeded StepState = "succeeded"
	StepFailed    StepState = "failed"
	StepSkipped   StepState = "skipped"
	StepCancelled StepState = "cancelled"
	StepBlocked   StepState = "blocked" // the plan did not run (gaps, policy, invalid)
)

// Terminal reports whether a step state is final.
func (s StepState) Terminal() bool {
	switch s {
	case StepSucceeded, StepFailed, StepSkipped, StepCancelled, StepBlocked:
		return true
	}
	return false
}

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

// Wait is what a waiting step waits for.
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
	// Run and Step: where the wait is when it is not the step's own (an
	// agent step's round waits at its sub-run's gate); a decision on the
	// step goes there, naming Proposal, the digest of what it approves.
	Run      string `json:"run,omitempty"`
	Step     string `json:"step,omitempty"`
	Proposal string `json:"proposal,omitempty"`
}

// ControlRequest is the pause and resume updates' argument.
type ControlRequest struct {
	By string `json:"by"`
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
	// Proposal names, for an agent step's gate, the digest of the proposal
	// decided on (its first 12 hex digits at least): a decision meant for
	// one proposal never lands on the next (docs/agents.md).
	Proposal string `json:"proposal,omitempty"`
}

// A decision's by and comment are bounded (they are kept in the run's
// result and report).
const (
	MaxDecisionBy      = 256
	MaxDecisionComment = 16 << 10
)

// Check refuses what no run takes, whatever it waits for: a decision
// without who made it, a by or comment past its bound, a timeout that is
// not a positive duration or not with retry. The run checks it again (its
// update validator), with the step's wait.
func (r DecideRequest) Check() error {
	switch {
	case strings.TrimSpace(r.By) == "":
		return errors.New("a decision needs who made it (by)")
	case len(r.By) > MaxDecisionBy || len(r.Comment) > MaxDecisionComment:
		// Unbounded, a 1.5 MB comment failed the workflow task.
		return fmt.Errorf("a decision's by is at most %d bytes and its comment at most %d (this one: %d and %d)", MaxDecisionBy, MaxDecisionComment, len(r.By), len(r.Comment))
	case r.Proposal != "" && !proposalRE.MatchString(r.Proposal):
		return fmt.Errorf("proposal %q is not a proposal's digest: 12 to 64 hex digits", r.Proposal)
	case r.Timeout == "":
		return nil
	case r.Action != ActionRetry:
		return errors.New("a decision's timeout goes with retry only")
	}
	if d, err := time.ParseDuration(r.Timeout); err != nil || d <= 0 {
		return fmt.Errorf("timeout %q is not a positive duration like 30s or 5m", r.Timeout)
	}
	return nil
}

var proposalRE = regexp.MustCompile(`^[0-9a-f]{12,64}$`)

// DecisionID is the update ID that makes a decision idempotent: the same
// answer to the same wait, sent twice (a retried request, two operators
// clicking at once), is one decision.
func DecisionID(waitID string, req DecideRequest) string {
	return fmt.Sprintf("decide/%s/%s", waitID, req.Action)
}

// Decided says what a step that no longer waits was last decided, the
// way the run refuses a decision for it ("" when nothing was).
func (r *Result) Decided(step string) string {
	for _, s := range r.Steps {
		if s.ID == step && s.Waiting == nil && len(s.Decisions) > 0 {
			return NotWaiting(step, s.Status, s.Decisions)
		}
	}
	return ""
}

// NotWaiting is why a decision for a step that does not wait is refused:
// its state, and its last decision if it had one.
func NotWaiting(step string, status StepState, decisions []Decision) string {
	why := fmt.Sprintf("step %s is %s, not waiting", step, status)
	if n := len(decisions); n > 0 {
		why += "; already decided: " + decisions[n-1].String()
	}
	return why
}

// DecisionUpdateID is the update ID of a decision on this run as its
// progress shows it: the wait the step is in ("" when it waits for
// nothing: the run then refuses the decision, saying what was decided).
func (r *Result) DecisionUpdateID(req DecideRequest) string {
	for _, s := range r.Steps {
		if s.ID == req.Step && s.Waiting != nil {
			return DecisionID(s.Waiting.ID, req)
		}
	}
	return ""
}

// Decision is a decision as recorded on its step.
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
	done, ok := map[Action]string{ActionApprove: "approved", ActionReject: "rejected",
		ActionRetry: "retried", ActionSkip: "skipped", ActionFail: "failed"}[d.Action]
	if !ok {
		done = string(d.Action)
	}
	s := fmt.Sprintf("%s by %s at %s", done, d.By, d.At)
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

// Input starts a run: a plan object, a plan file in the workers' project,
// or request text to route. These are the only fields a client may send;
// a run given any other ends failed with INVALID_INPUT naming it.
type Input struct {
	Plan any `json:"plan,omitempty"`
	// PlanFile is a plan file inside the project (a path from its root),
	// read by the worker: how plans too large for a workflow input travel.
	PlanFile string         `json:"plan_file,omitempty"`
	Request  string         `json:"request,omitempty"`
	Inputs   map[string]any `json:"inputs,omitempty"`
	// Reuse names an earlier run whose succeeded steps this run may reuse
	// (docs/run-control.md, rerun).
	Reuse *Reuse `json:"reuse,omitempty"`
}

// Reuse is a rerun's link to the run it reuses from: a step that
// succeeded there, with the same tool digest and the same evaluated
// inputs, and that is not From or downstream of it, runs no tool.
type Reuse struct {
	WorkflowID string `json:"workflow_id"`
	From       string `json:"from,omitempty"`
}

// OutputNames lists a result's outputs, sorted.
func (r *Result) OutputNames() []string { return slices.Sorted(maps.Keys(r.Outputs)) }

// PlanStepHeader marks every HTTP request a plan's http.request step
// sends (the step's run folder's name); a plan cannot set or remove it.
// capflow's own servers (the console) refuse requests that carry it: a
// plan never drives them.
const PlanStepHeader = "Capflow-Plan-Step"
