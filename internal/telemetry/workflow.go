package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	capclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/wftrace"
)

// runTracer is the SDK's OpenTelemetry tracer with one change: a
// workflow's own span (RunWorkflow) takes identifiers derived from the
// run (the SDK's idempotency key), and, when no client sent a parent, a
// trace ID derived from it too. The OpenTelemetry tracer ignores the key:
// each worker that replays a run would start a new span, in a new trace.
type runTracer struct {
	interceptor.Tracer
	otel trace.Tracer
}

func (r *runTracer) StartSpan(o *interceptor.TracerStartSpanOptions) (interceptor.TracerSpan, error) {
	if o.Operation != "RunWorkflow" || o.IdempotencyKey == "" {
		return r.Tracer.StartSpan(o)
	}
	ctx := withIDs(context.Background(), derive("run", o.IdempotencyKey))
	if p := refContext(o.Parent); p.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, p)
	}
	attrs := make([]attribute.KeyValue, 0, len(o.Tags))
	for k, v := range o.Tags {
		attrs = append(attrs, attribute.String(k, v))
	}
	_, span := r.otel.Start(ctx, o.Operation+":"+o.Name, trace.WithTimestamp(o.Time),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return r.Tracer.SpanFromContext(trace.ContextWithSpan(context.Background(), span)), nil
}

// refContext is the span context of a parent the SDK's tracer handed
// over: a span (from a context) or a reference read from a header.
func refContext(p interceptor.TracerSpanRef) trace.SpanContext {
	switch p := p.(type) {
	case interface{ SpanContext() trace.SpanContext }:
		return p.SpanContext()
	case interface{ WithRemote(bool) trace.SpanContext }:
		return p.WithRemote(true)
	}
	return trace.SpanContext{}
}

// workflowInterceptor adds capflow's run span inside Temporal's
// RunWorkflow span, and a wftrace.Tracer for the run's steps.
type workflowInterceptor struct {
	interceptor.InterceptorBase
	t *Tracing
}

func (w *workflowInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &runInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, t: w.t}
}

type runInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	t *Tracing
}

// ExecuteWorkflow runs the workflow inside its run span: a span whose
// identity derives from the run, set on the context as the parent of
// every span the workflow starts, exported when the run ends (or
// continues as new).
func (r *runInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	parent := r.t.spanOn(ctx)
	if !parent.IsValid() {
		return r.Next.ExecuteWorkflow(ctx, in)
	}
	info := workflow.GetInfo(ctx)
	run := r.t.child(parent, "run", info.Namespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	ctx = r.t.withSpan(ctx, run)
	ctx = wftrace.With(ctx, &stepTracer{t: r.t, run: run})
	res, err := r.Next.ExecuteWorkflow(ctx, in)
	if workflow.IsReplaying(ctx) {
		return res, err
	}
	attrs := []attribute.KeyValue{
		attribute.String("capflow.workflow_id", info.WorkflowExecution.ID),
		attribute.String("capflow.run_id", info.WorkflowExecution.RunID),
		attribute.String("capflow.workflow_type", info.WorkflowType.Name),
	}
	status, msg := runStatus(res, err)
	attrs = append(attrs, attribute.String("capflow.status", status))
	if cr, ok := res.(*capclient.Result); ok && cr != nil {
		attrs = append(attrs, attribute.String("capflow.plan", cr.Plan))
	}
	r.t.export(parent, run, "run "+info.WorkflowExecution.ID, info.WorkflowStartTime, workflow.Now(ctx), status != "passed" && status != "continued", msg, attrs)
	return res, err
}

// runStatus is how a workflow ended, as its span says it.
func runStatus(res any, err error) (status, msg string) {
	switch {
	case workflow.IsContinueAsNewError(err):
		return "continued", ""
	case err != nil:
		return "error", err.Error()
	}
	if cr, ok := res.(*capclient.Result); ok && cr != nil {
		return string(cr.Status), cr.Message
	}
	return "passed", ""
}

// stepTracer gives each step a span beneath the run's.
type stepTracer struct {
	t   *Tracing
	run trace.SpanContext
}

func (s *stepTracer) StepContext(ctx workflow.Context, id string) workflow.Context {
	return s.t.withSpan(ctx, s.t.child(s.run, "step", id))
}

func (s *stepTracer) EndStep(_ workflow.Context, st wftrace.Step) {
	attrs := []attribute.KeyValue{
		attribute.String("capflow.step", st.ID),
		attribute.String("capflow.capability", st.Capability),
		attribute.String("capflow.tool", st.Tool),
		attribute.String("capflow.status", st.Status),
		attribute.Int("capflow.attempts", st.Attempts),
	}
	for k, v := range map[string]string{"capflow.error_code": st.Code, "capflow.error_cause": st.Cause, "capflow.path": st.Path} {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	failed := st.Status == "failed" || st.Status == "cancelled"
	s.t.export(s.run, s.t.child(s.run, "step", st.ID), st.ID, st.Start, st.End, failed, st.Message, attrs)
}

// child is the span context of a span beneath parent identified by parts.
func (t *Tracing) child(parent trace.SpanContext, parts ...string) trace.SpanContext {
	ids := derive(append([]string{parent.SpanID().String()}, parts...)...)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: parent.TraceID(), SpanID: ids.span,
		TraceFlags: parent.TraceFlags(), TraceState: parent.TraceState()})
}

// spanOn is the span context Temporal's interceptor set on ctx.
func (t *Tracing) spanOn(ctx workflow.Context) trace.SpanContext {
	if s, ok := ctx.Value(t.key).(interceptor.TracerSpan); ok {
		return refContext(s)
	}
	return trace.SpanContext{}
}

// withSpan is ctx with sc as the parent of the spans Temporal's
// interceptor starts from it.
func (t *Tracing) withSpan(ctx workflow.Context, sc trace.SpanContext) workflow.Context {
	ref := t.temporal.SpanFromContext(trace.ContextWithSpanContext(context.Background(), sc))
	return workflow.WithValue(ctx, t.key, ref)
}

// export sends a span that ended: sc beneath parent, from start to end.
func (t *Tracing) export(parent, sc trace.SpanContext, name string, start, end time.Time, failed bool, msg string, attrs []attribute.KeyValue) {
	ctx := withIDs(trace.ContextWithSpanContext(context.Background(), parent), fixedIDs{trace: sc.TraceID(), span: sc.SpanID()})
	_, span := t.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if failed {
		span.SetStatus(codes.Error, msg)
	}
	span.End(trace.WithTimestamp(end))
}
