package wfapi

import "github.com/capflow/capflow/client"

// Run control (docs/run-control.md): Temporal Updates on a running
// PlanWorkflow, each checked by a validator before anything changes.
const (
	UpdatePause  = client.UpdatePause
	UpdateResume = client.UpdateResume
	UpdateDecide = client.UpdateDecide
)

// What a step can wait for, and the answers.
const (
	WaitApproval  = client.WaitApproval
	WaitDecision  = client.WaitDecision
	ActionApprove = client.ActionApprove
	ActionReject  = client.ActionReject
	ActionRetry   = client.ActionRetry
	ActionSkip    = client.ActionSkip
	ActionFail    = client.ActionFail
)
