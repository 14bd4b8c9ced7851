// Code generated from package wire's exports; DO NOT EDIT by hand: a test
// (TestClientReexportsWire) fails when they differ.

package client

import "github.com/capflow/capflow/wire"

// The wire types, defined once in package wire (which imports nothing of
// Temporal), are the client's own: a Go service needs import only client.

type (
	Action          = wire.Action
	AgentRound      = wire.AgentRound
	AgentRun        = wire.AgentRun
	AgentSpent      = wire.AgentSpent
	Artifact        = wire.Artifact
	ChildRun        = wire.ChildRun
	ControlAnswer   = wire.ControlAnswer
	ControlRequest  = wire.ControlRequest
	DecideRequest   = wire.DecideRequest
	Decision        = wire.Decision
	Envelope        = wire.Envelope
	ErrorCode       = wire.ErrorCode
	ErrorInfo       = wire.ErrorInfo
	Feedback        = wire.Feedback
	Gap             = wire.Gap
	Graph           = wire.Graph
	GraphStep       = wire.GraphStep
	Heartbeat       = wire.Heartbeat
	Input           = wire.Input
	ItemCounts      = wire.ItemCounts
	ItemResult      = wire.ItemResult
	Next            = wire.Next
	Omitted         = wire.Omitted
	PendingActivity = wire.PendingActivity
	PolicyReport    = wire.PolicyReport
	Problem         = wire.Problem
	ReportPaths     = wire.ReportPaths
	Resolution      = wire.Resolution
	Result          = wire.Result
	Reuse           = wire.Reuse
	RouteInfo       = wire.RouteInfo
	RunInfo         = wire.RunInfo
	RunStatus       = wire.RunStatus
	Severity        = wire.Severity
	StepResult      = wire.StepResult
	StepState       = wire.StepState
	Violation       = wire.Violation
	Wait            = wire.Wait
	WaitKind        = wire.WaitKind
	WorkflowTask    = wire.WorkflowTask
)

const (
	ActionApprove            = wire.ActionApprove
	AgentQuery               = wire.AgentQuery
	ActionFail               = wire.ActionFail
	ActionReject             = wire.ActionReject
	ActionRetry              = wire.ActionRetry
	ActionSkip               = wire.ActionSkip
	DefaultTaskQueue         = wire.DefaultTaskQueue
	GapDependencyUnavailable = wire.GapDependencyUnavailable
	GapInvalidCapability     = wire.GapInvalidCapability
	GapLowConfidence         = wire.GapLowConfidence
	GapNoCapabilityMatch     = wire.GapNoCapabilityMatch
	GapSchemaIncompatible    = wire.GapSchemaIncompatible
	GraphPageQuery           = wire.GraphPageQuery
	GraphQuery               = wire.GraphQuery
	MaxDecisionBy            = wire.MaxDecisionBy
	MaxDecisionComment       = wire.MaxDecisionComment
	MaxGraphPage             = wire.MaxGraphPage
	OnHostSuffix             = wire.OnHostSuffix
	Overdue                  = wire.Overdue
	PlanStepHeader           = wire.PlanStepHeader
	ProgressQuery            = wire.ProgressQuery
	SearchAttrPlan           = wire.SearchAttrPlan
	SearchAttrSchedule       = wire.SearchAttrSchedule
	SearchAttrStatus         = wire.SearchAttrStatus
	StatesPageQuery          = wire.StatesPageQuery
	StatesQuery              = wire.StatesQuery
	StatusBlockedByPolicy    = wire.StatusBlockedByPolicy
	StatusCancelled          = wire.StatusCancelled
	StatusFailed             = wire.StatusFailed
	StatusInvalid            = wire.StatusInvalid
	StatusPartialComplete    = wire.StatusPartialComplete
	StatusPassed             = wire.StatusPassed
	StatusPaused             = wire.StatusPaused
	StatusResolving          = wire.StatusResolving
	StatusRunning            = wire.StatusRunning
	StepBlocked              = wire.StepBlocked
	StepCancelled            = wire.StepCancelled
	StepFailed               = wire.StepFailed
	StepPending              = wire.StepPending
	StepRunning              = wire.StepRunning
	StepSkipped              = wire.StepSkipped
	StepSucceeded            = wire.StepSucceeded
	StepWaiting              = wire.StepWaiting
	UpdateDecide             = wire.UpdateDecide
	UpdatePause              = wire.UpdatePause
	UpdateResume             = wire.UpdateResume
	WaitApproval             = wire.WaitApproval
	WaitDecision             = wire.WaitDecision
	WorkflowType             = wire.WorkflowType
)

var (
	RunStatuses = wire.RunStatuses
	Severities  = wire.Severities
)

// ReservedEnding: see wire.ReservedEnding.
func ReservedEnding(stepID string) string { return wire.ReservedEnding(stepID) }

// LabelOfActivity: see wire.LabelOfActivity.
func LabelOfActivity(activityID string) (string, bool) { return wire.LabelOfActivity(activityID) }

// StepOfActivity: see wire.StepOfActivity.
func StepOfActivity(activityID string) (string, bool) { return wire.StepOfActivity(activityID) }

// DecisionID: see wire.DecisionID.
func DecisionID(waitID string, req DecideRequest) string { return wire.DecisionID(waitID, req) }

// NotWaiting: see wire.NotWaiting.
func NotWaiting(step string, status StepState, decisions []Decision) string {
	return wire.NotWaiting(step, status, decisions)
}
