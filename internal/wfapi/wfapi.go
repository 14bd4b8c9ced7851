// Package wfapi holds the types that cross the workflow boundary: the
// PlanWorkflow's input and result (docs/workflow.md), the activities'
// inputs and outputs, and the progress query. Plain JSON, no Temporal
// import, so any client (Go, Python, TypeScript) can use the same shapes.
package wfapi

import (
	"fmt"
	"time"

	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/wire"
)

// Names registered with Temporal.
const (
	WorkflowType    = wire.WorkflowType
	ResolveActivity = "Resolve"
	RouteActivity   = "Route"
	RunToolActivity = "RunTool"
	// EvaluateActivity keeps the type name recorded runs scheduled it by
	// (it was called Decide; "decide" is now only a person's decision).
	EvaluateActivity = "Decide"
	FinalizeActivity = "Finalize"
	// HostActivity answers the host queue of the worker that runs it: how a
	// run whose host was lost finds another.
	HostActivity  = "Host"
	ProgressQuery = wire.ProgressQuery

	SearchAttrPlan   = "CapflowPlan"
	SearchAttrStatus = "CapflowStatus"
)

// The wire types (package wire), under the names the worker
// has always used: one definition each.
type (
	RunStatus      = wire.RunStatus
	StepState      = wire.StepState
	Input          = wire.Input
	Reuse          = wire.Reuse
	ItemCounts     = wire.ItemCounts
	ItemResult     = wire.ItemResult
	RouteInfo      = wire.RouteInfo
	Omitted        = wire.Omitted
	WaitKind       = wire.WaitKind
	Action         = wire.Action
	Wait           = wire.Wait
	DecideRequest  = wire.DecideRequest
	Decision       = wire.Decision
	ControlAnswer  = wire.ControlAnswer
	ControlRequest = wire.ControlRequest
)

// Run statuses.
const (
	StatusResolving       = wire.StatusResolving
	StatusRunning         = wire.StatusRunning
	StatusPaused          = wire.StatusPaused
	StatusPassed          = wire.StatusPassed
	StatusFailed          = wire.StatusFailed
	StatusPartialComplete = wire.StatusPartialComplete
	StatusBlockedByPolicy = wire.StatusBlockedByPolicy
	StatusInvalid         = wire.StatusInvalid
	StatusCancelled       = wire.StatusCancelled
)

// Step states.
const (
	StepPending   = wire.StepPending
	StepRunning   = wire.StepRunning
	StepWaiting   = wire.StepWaiting
	StepSucceeded = wire.StepSucceeded
	StepFailed    = wire.StepFailed
	StepSkipped   = wire.StepSkipped
	StepCancelled = wire.StepCancelled
	StepBlocked   = wire.StepBlocked
)

// HostInfo is the Host activity's answer: a worker's host queue, and where
// the run's folder is on that host.
type HostInfo struct {
	Queue  string `json:"queue"`
	RunDir string `json:"run_dir"`
	// SharedStore: the host's artifact store is shared, so the run's
	// finished steps' outputs are read from it, not made again there.
	SharedStore bool `json:"shared_store,omitempty"`
}

// ResolvedStep is a step with everything the scheduler needs, fixed at
// resolution time and recorded in history.
type ResolvedStep struct {
	ID         string `json:"id"`
	Capability string `json:"capability"`
	Tool       string `json:"tool"`
	Version    string `json:"version"`
	Digest     string `json:"digest"`
	Source     string `json:"source"`
	Summary    string `json:"summary"`
	TaskQueue  string `json:"task_queue,omitempty"`
	// The effective timeouts and retry policy (JSON keys promoted).
	plan.StepSettings
	Idempotent bool           `json:"idempotent"`
	Deps       []string       `json:"deps,omitempty"`
	Join       plan.Join      `json:"join"`
	OnFailure  string         `json:"on_failure"`
	Critical   bool           `json:"critical,omitempty"`
	With       map[string]any `json:"with,omitempty"`
	// Control flow (docs/plans.md).
	ForEach     any            `json:"for_each,omitempty"`
	ItemName    string         `json:"item_name,omitempty"`
	MaxParallel int            `json:"max_parallel,omitempty"`
	Tolerate    *plan.Tolerate `json:"tolerate,omitempty"`
	When        string         `json:"when,omitempty"`
	// Approval: a flow.approve step, which waits in the workflow for a
	// person's decision instead of running an activity.
	Approval bool `json:"approval,omitempty"`
	// Local: the step runs as a local activity (its tool's execution;
	// docs/manifests.md).
	Local bool `json:"local,omitempty"`
	// Inline: a local step whose builtin the worker may evaluate inside
	// workflow code when its inputs allow (execution: inline); recorded
	// here so a run replays the path it took.
	Inline bool `json:"inline,omitempty"`
	// Plan and PlanValue: a sub-plan step's file and the plan as checked
	// at resolution (the child workflow runs exactly that).
	Plan      string `json:"plan,omitempty"`
	PlanValue any    `json:"plan_value,omitempty"`
	// Agent: an agent step's block (docs/agents.md); its With holds its
	// goal (AgentGoal), evaluated like a sub-plan's inputs.
	Agent *AgentStep `json:"agent,omitempty"`
	// CacheTTL: the step's results are cached, and a hit no older than
	// this is reused (0: not cached; docs/cache.md).
	CacheTTL time.Duration `json:"cache_ttl,omitempty"`
}

// StepSummary is the activity summary the Web UI shows.
func StepSummary(id, capability, tool, version string) string {
	if tool == "" {
		return fmt.Sprintf("%s · %s", id, capability)
	}
	return fmt.Sprintf("%s · %s → %s@%s", id, capability, tool, version)
}

// ResolveInput is the Resolve activity's input.
type ResolveInput struct {
	Plan       any            `json:"plan"`
	PlanFile   string         `json:"plan_file,omitempty"`
	Inputs     map[string]any `json:"inputs,omitempty"`
	WorkflowID string         `json:"workflow_id"`
	RunID      string         `json:"run_id"`
	// LLMCalls: the model calls its route made (they leave fewer of the
	// run's max_llm_calls to its agent steps).
	LLMCalls int `json:"llm_calls,omitempty"`
	// CarrySteps says the workflow carries steps that travel in the
	// result into its next segment itself: Resolve stores them (the run
	// folder's resolved.json, the shared store) only when they leave the
	// result. A workflow without it reloads them from the file.
	CarrySteps bool `json:"carry_steps,omitempty"`
	// Ahead: evaluate the first inline steps too (ResolveResult.Ahead).
	Ahead bool `json:"ahead,omitempty"`
}

// ResolveResult is the Resolve activity's result: the preflight report
// plus the resolved steps.
type ResolveResult struct {
	Status        string             `json:"status"`
	Message       string             `json:"message"`
	Plan          string             `json:"plan"`
	Description   string             `json:"description,omitempty"`
	FailurePolicy string             `json:"failure_policy"`
	MaxParallel   int                `json:"max_parallel"`
	MaxRunSeconds int                `json:"max_run_seconds"`
	Inputs        map[string]any     `json:"inputs,omitempty"`
	Steps         []ResolvedStep     `json:"steps"`
	Resolution    []wire.Resolution  `json:"resolution"`
	Gaps          []wire.Gap         `json:"gaps"`
	Policy        *wire.PolicyReport `json:"policy,omitempty"`
	Problems      []wire.Problem     `json:"problems,omitempty"`
	// Omitted counts the gaps, problems and policy violations past
	// MaxListed each that were left out (Preflight file has them all).
	Omitted *Omitted          `json:"omitted,omitempty"`
	Notes   []string          `json:"notes,omitempty"`
	RunDir  string            `json:"run_dir"`
	Outputs map[string]string `json:"outputs,omitempty"`
	// AskTimeout bounds each wait for a decision (0: plan.DefaultAskTimeout).
	AskTimeout time.Duration `json:"ask_timeout,omitempty"`
	Route      *RouteInfo    `json:"route,omitempty"`
	PlanValue  any           `json:"plan_value,omitempty"`
	// SearchAttributes is true when the server has CapflowPlan and
	// CapflowStatus registered (checked by the worker at start-up).
	SearchAttributes bool `json:"search_attributes"`
	// StepsRef is where the resolved steps are stored; Steps and
	// Resolution are left empty when they are too large to travel here.
	StepsRef *StepsRef `json:"steps_ref,omitempty"`
	// PackedSteps: stored steps that fit here once packed (what they share
	// written once); the workflow unpacks them instead of loading pages.
	PackedSteps *StepsPage `json:"packed_steps,omitempty"`
	// HostQueue is the task queue of the worker host that resolved the run:
	// its steps run there, where the run folder and its processes are
	// ("": any worker, as runs recorded before).
	HostQueue string `json:"host_queue,omitempty"`
	// SharedStore: the host's artifact store is shared (HostInfo).
	SharedStore bool `json:"shared_store,omitempty"`
	// Ahead: the outcomes of the inline steps the run starts with and
	// those that follow them, evaluated as a batch would (baseline 4).
	Ahead []InlineAhead `json:"ahead,omitempty"`
	// RunSettings are what the run recorded of how its steps run
	// (workflows' profile reads them once a segment).
	RunSettings
}

// RunSettings are the settings a run records when it is resolved and
// reads as recorded ever after: a worker's later configuration, or a new
// default, does not change a run under way (0: the workflow's default for
// runs recorded before the setting was).
type RunSettings struct {
	// HostWait: how long a step waits for a worker of that host before the
	// run moves to another (0: the workflow's default).
	HostWait time.Duration `json:"host_wait,omitempty"`
	// SegmentEvents is the history length at which the run continues as
	// new (0: never, as runs recorded before segments).
	SegmentEvents int `json:"segment_events,omitempty"`
	// SegmentBytes is the history size at which the run continues as new
	// too (0: never, as runs recorded before it).
	SegmentBytes int `json:"segment_bytes,omitempty"`
	// ItemBatch, LocalFlush and LocalAttempts steer the run's decisions
	// (Default*; 0: the workflow's own defaults, as runs recorded before
	// they were recorded).
	ItemBatch     int `json:"item_batch,omitempty"`
	LocalFlush    int `json:"local_flush,omitempty"`
	LocalAttempts int `json:"local_attempts,omitempty"`
	// InlineFlushBytes: DefaultInlineFlushBytes, recorded (0: the
	// workflow's default).
	InlineFlushBytes int `json:"inline_flush_bytes,omitempty"`
	// InlineBatch: DefaultInlineBatch, recorded (0: the workflow's
	// default).
	InlineBatch int `json:"inline_batch,omitempty"`
	// EagerSteps is how many of a workflow task's steps for the run's host
	// go to the workflow's own queue, where the server may start them on
	// the worker that completed the task (temporal.eager_steps; 0: none).
	EagerSteps int `json:"eager_steps,omitempty"`
}

// EagerPerTask is EagerSteps when a worker's temporal.eager_steps is on:
// the Go SDK's eager reservations per workflow task, which the worker sets
// to it (a step past it would wait on the shared queue, for any worker).
const EagerPerTask = 3

// StepOutcome is what a later step can reference of a finished one. Large
// data lives in DataFile instead of Data.
type StepOutcome struct {
	Success bool `json:"success"`
	// Status is the step's state (conditions read it).
	Status   StepState `json:"status,omitempty"`
	Data     any       `json:"data,omitempty"`
	DataFile string    `json:"data_file,omitempty"`
	// DataSHA256 is the stored file's digest, recorded in history: a
	// consumer refuses a file that is missing or was altered.
	DataSHA256 string `json:"data_sha256,omitempty"`
	// Artifacts are the files its data names: a consumer on another host
	// fetches them from the store (docs/artifacts.md).
	Artifacts []Artifact `json:"artifacts,omitempty"`
}

// Condition is what a `when` expression sees of a step: its data (as
// loaded: stored data is read back first), success and status.
func (o StepOutcome) Condition(data any) map[string]any {
	return map[string]any{"data": data, "success": o.Success, "status": string(o.Status)}
}

// Conditions is what a `when` expression sees of its steps, data as loaded.
func Conditions(deps map[string]StepOutcome, data func(id string) any) map[string]any {
	out := make(map[string]any, len(deps))
	for id, o := range deps {
		out[id] = o.Condition(data(id))
	}
	return out
}

// StepCall is what RunTool needs to know of a step: kept small, since one
// is recorded in history for every step.
type StepCall struct {
	ID string `json:"id"`
	// Capability is the plan's (a capability's limits in capflow.yaml hold
	// the step).
	Capability string         `json:"capability,omitempty"`
	Tool       string         `json:"tool"`
	Version    string         `json:"version"`
	Digest     string         `json:"digest"`
	Idempotent bool           `json:"idempotent,omitempty"`
	With       map[string]any `json:"with,omitempty"`
	// Item is set for one item of a for_each step: the activity evaluates
	// the step's list (ForEach) and takes element Index as ItemName.
	Item *ItemCall `json:"item,omitempty"`
	// ReuseFrom: the run whose result this step may reuse (Reuse).
	ReuseFrom string `json:"reuse_from,omitempty"`
	// CacheTTL: see ResolvedStep.
	CacheTTL time.Duration `json:"cache_ttl,omitempty"`
}

// EvaluateInput asks the Evaluate activity to evaluate a step's for_each list
// (its length, and which items' `when` holds) or its `when` alone, where
// the data it reads may live in files the workflow cannot open.
type EvaluateInput struct {
	StepID   string                 `json:"step_id"`
	ForEach  any                    `json:"for_each,omitempty"`
	ItemName string                 `json:"item_name,omitempty"`
	When     string                 `json:"when,omitempty"`
	Inputs   map[string]any         `json:"inputs,omitempty"`
	Deps     map[string]StepOutcome `json:"deps,omitempty"`
	// With, when set, is evaluated (a sub-plan step's inputs).
	With map[string]any `json:"with,omitempty"`
	// SpillWith: the caller reads EvaluateResult.WithSpilled (workflow code
	// that knows it sets it; an older one, answered by a newer worker,
	// gets its inputs in the answer as before).
	SpillWith bool `json:"spill_with,omitempty"`
	// Spilled: the input would have passed MaxInputBytes; all of it is
	// this blob of the run folder (StepID beside it).
	Spilled *Blob `json:"spilled,omitempty"`
}

// EvaluateResult is the Evaluate activity's answer.
type EvaluateResult struct {
	// Run is a step's `when` (true without one); a for_each step's items
	// are decided by Count and Skip.
	Run bool `json:"run"`
	// Count is the for_each list's length; Skip the items whose `when` is
	// false.
	Count int   `json:"count"`
	Skip  []int `json:"skip,omitempty"`
	// With is the evaluated With of the input; WithSpilled, instead, the
	// blob in the run folder that holds it when it passes MaxInputBytes.
	With        map[string]any `json:"with,omitempty"`
	WithSpilled *Blob          `json:"with_spilled,omitempty"`
}

// ChildRun links a sub-plan step to its child workflow and report.
type ChildRun = wire.ChildRun

// FinalizeInput is the Finalize activity's input.
type FinalizeInput struct {
	Result   Result         `json:"result"`
	Resolved *ResolveResult `json:"resolved,omitempty"`
	// Segments > 0: the run continued as new that many times; the steps
	// of earlier segments are read from their checkpoints, each checked
	// against its blob in Checkpoints (runs recorded before: unchecked).
	Segments    int    `json:"segments,omitempty"`
	Checkpoints []Blob `json:"checkpoints,omitempty"`
}

// MaxListed bounds the gaps, problems and policy violations a run records
// in history (each): a plan of thousands of broken steps must not make a
// result past Temporal's payload limit, which would end the run unheard.
const MaxListed = 100

// PreflightFile, in the run folder, holds every gap, problem and policy
// violation when some were left out of the recorded results.
const PreflightFile = "preflight.json"

// Preflight is the content of PreflightFile.
type Preflight struct {
	Gaps       []wire.Gap       `json:"gaps"`
	Problems   []wire.Problem   `json:"problems"`
	Violations []wire.Violation `json:"violations"`
}

// Bound keeps at most MaxListed of each list and returns the full lists
// when it cut any (nil when all fit).
func (rr *ResolveResult) Bound(file string) *Preflight {
	var viol []wire.Violation
	if rr.Policy != nil {
		viol = rr.Policy.Violations
	}
	if len(rr.Gaps) <= MaxListed && len(rr.Problems) <= MaxListed && len(viol) <= MaxListed {
		return nil
	}
	full := &Preflight{Gaps: rr.Gaps, Problems: rr.Problems, Violations: viol}
	om := &Omitted{File: file}
	rr.Gaps, om.Gaps = cut(rr.Gaps)
	rr.Problems, om.Problems = cut(rr.Problems)
	if rr.Policy != nil {
		p := *rr.Policy
		p.Violations, om.Violations = cut(p.Violations)
		rr.Policy = &p
	}
	rr.Omitted = om
	return full
}

func cut[T any](list []T) ([]T, int) {
	if len(list) <= MaxListed {
		return list, 0
	}
	return list[:MaxListed:MaxListed], len(list) - MaxListed
}
