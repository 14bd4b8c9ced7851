package activities

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/wfapi"
)

// RunTool runs one attempt of a step or item (runTool), traced as an
// attempt span beneath the step's when the worker traces. A local or
// eager attempt on another host than the run's is refused before
// anything runs: no attempt of the step, so no span.
func (a *Activities) RunTool(ctx context.Context, in wfapi.RunToolInput) (*wfapi.RunToolResult, error) {
	if err := a.elsewhere(ctx, in.Host, false); err != nil {
		return nil, err
	}
	if a.Tracer == nil {
		return a.runTool(ctx, in)
	}
	label := in.Step.ID
	tool := in.Step.Tool
	if in.Step.Version != "" {
		tool += "@" + in.Step.Version
	}
	attrs := []attribute.KeyValue{attribute.String("capflow.step", in.Step.ID), attribute.String("capflow.tool", tool)}
	if in.Step.Item != nil {
		label = wfapi.ItemLabel(in.Step.ID, in.Step.Item.Index)
		attrs = append(attrs, attribute.Int("capflow.item", in.Step.Item.Index))
	}
	attempt := activity.GetInfo(ctx).Attempt + in.AttemptsBefore
	attrs = append(attrs, attribute.Int("capflow.attempt", int(attempt)))
	ctx, span := a.Tracer.Start(ctx, fmt.Sprintf("%s attempt %d", label, attempt), trace.WithAttributes(attrs...))
	res, err := a.runTool(ctx, in)
	endAttempt(span, res, err)
	return res, err
}

// endAttempt ends an attempt's span with how the attempt ended.
func endAttempt(span trace.Span, res *wfapi.RunToolResult, err error) {
	defer span.End()
	var app *temporal.ApplicationError
	switch {
	case errors.As(err, &app):
		span.SetAttributes(attribute.String("capflow.error_code", app.Type()))
		span.SetStatus(codes.Error, app.Message())
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
	case res != nil:
		span.SetAttributes(attribute.Int("capflow.exit_code", res.Envelope.ExitCode))
		for k, v := range map[string]string{"capflow.cached_from": res.CachedFrom, "capflow.reused_from": res.ReusedFrom} {
			if v != "" {
				span.SetAttributes(attribute.String(k, v))
			}
		}
	}
}
