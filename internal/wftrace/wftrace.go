// Package wftrace lets workflow code report its steps as trace spans
// without importing a tracing library: the worker's telemetry
// (internal/telemetry) puts a Tracer on the workflow's context, and
// without one every call here does nothing. Nothing here changes a
// workflow's commands, so traced and untraced workers replay each other's
// histories.
package wftrace

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// Step is how one step of a run went: its span's name is ID.
type Step struct {
	ID string
	// Run counts the times the step ran again (to re-create an output a
	// consumer found lost): each time is a span of its own.
	Run        int
	Capability string
	// Tool is tool@version.
	Tool   string
	Status string
	// Code and Cause are the step's error code and its cause ("": none).
	Code, Cause string
	Message     string
	Attempts    int
	// Path is how it ran: local, activity, or local then activity.
	Path       string
	Start, End time.Time
}

// Tracer records a run's steps.
type Tracer interface {
	// StepContext is ctx with the step's span as the parent of what the
	// step starts (its activities, its child workflow). Pure: the span's
	// identity derives from the run, the step id and run (Step.Run).
	StepContext(ctx workflow.Context, id string, run int) workflow.Context
	// EndStep exports the step's span.
	EndStep(ctx workflow.Context, s Step)
}

type key struct{}

// With is ctx carrying t.
func With(ctx workflow.Context, t Tracer) workflow.Context {
	return workflow.WithValue(ctx, key{}, t)
}

func from(ctx workflow.Context) Tracer {
	t, _ := ctx.Value(key{}).(Tracer)
	return t
}

// StepContext is ctx with the step's span as the parent of what the step
// starts; ctx itself when the run is not traced.
func StepContext(ctx workflow.Context, id string, run int) workflow.Context {
	if t := from(ctx); t != nil {
		return t.StepContext(ctx, id, run)
	}
	return ctx
}

// EndStep exports a step's span, unless the run is not traced or the
// workflow is replaying (the span went out when the step ended).
func EndStep(ctx workflow.Context, s Step) {
	if t := from(ctx); t != nil && !workflow.IsReplaying(ctx) {
		t.EndStep(ctx, s)
	}
}
