package wfapi

import "github.com/capflow/capflow/wire"

// Run control (docs/run-control.md): Temporal Updates on a running
// PlanWorkflow, each checked by a validator before anything changes.
const (
	UpdatePause  = wire.UpdatePause
	UpdateResume = wire.UpdateResume
	UpdateDecide = wire.UpdateDecide
)

// What a step can wait for, and the answers.
const (
	WaitApproval  = wire.WaitApproval
	WaitDecision  = wire.WaitDecision
	ActionApprove = wire.ActionApprove
	ActionReject  = wire.ActionReject
	ActionRetry   = wire.ActionRetry
	ActionSkip    = wire.ActionSkip
	ActionFail    = wire.ActionFail
)
