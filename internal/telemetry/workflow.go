package telemetry

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/internal/wftrace"
	capclient "github.com/capflow/capflow/wire"
)

// runTracer is the SDK's OpenTelemetry tracer with one change: a
// workflow's own span (RunWorkflow) is not started by it. The SDK starts
// that span again on every replay and ends it whenever the workflow leaves
// the worker's cache, and the OpenTelemetry tracer gives it a new ID each
// time (in a new trace when no client sent a parent). Here it gets IDs
// derived from the run, and it is exported once, by runInbound, when the
// run ends on a worker that is not replaying it.
type runTracer struct {
	interceptor.Tracer
	otel trace.Tracer
}

// runSpan is a workflow's RunWorkflow span until runInbound exports it.
type runSpan struct {
	sc, parent trace.SpanContext
	name       string
	start      time.Time
	attrs      []attribute.KeyValue
}

// Finish does nothing: runInbound exports the span.
func (*runSpan) Finish(*interceptor.TracerFinishSpanOptions) {}

func (r *runTracer) StartSpan(o *interceptor.TracerStartSpanOptions) (interceptor.TracerSpan, error) {
	if p, ok := o.Parent.(*runSpan); ok {
		// A span beneath the workflow's (a signal's, an update's).
		o.Parent = r.Tracer.SpanFromContext(trace.ContextWithSpanContext(context.Background(), p.sc))
	}
	wf, run := o.Tags[workflowIDTag], o.Tags[runIDTag]
	if o.Operation != "RunWorkflow" || wf == "" || run == "" {
		return r.Tracer.StartSpan(o)
	}
	// From the run's IDs, not the SDK's idempotency key: a signal handled
	// before the workflow starts would change the key's counter.
	ids := derive("run", wf, run)
	parent := refContext(o.Parent)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: ids.trace, SpanID: ids.span, TraceFlags: trace.FlagsSampled})
	if parent.IsValid() {
		sc = sc.WithTraceID(parent.TraceID()).WithTraceFlags(parent.TraceFlags()).WithTraceState(parent.TraceState())
	}
	attrs := make([]attribute.KeyValue, 0, len(o.Tags))
	for _, k := range slices.Sorted(maps.Keys(o.Tags)) {
		attrs = append(attrs, attribute.String(k, o.Tags[k]))
	}
	return &runSpan{sc: sc, parent: parent, name: o.Operation + ":" + o.Name, start: o.Time, attrs: attrs}, nil
}

// The tags Temporal's interceptor sets on a workflow's span.
const (
	workflowIDTag = "temporalWorkflowID"
	runIDTag      = "temporalRunID"
)

// refContext is the span context of a parent the SDK's tracer handed
// over: a span (from a context) or a reference read from a header.
func refContext(p interceptor.TracerSpanRef) trace.SpanContext {
	switch p := p.(type) {
	case *runSpan:
		return p.sc
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
	// run is the run span, once the workflow started.
	run trace.SpanContext
}

// ExecuteWorkflow runs the workflow inside its run span: a span whose
// identity derives from the run, set on the context as the parent of
// every span the workflow starts, exported when the run ends (or
// continues as new).
func (r *runInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	wfSpan, ok := ctx.Value(r.t.key).(*runSpan)
	if !ok {
		return r.Next.ExecuteWorkflow(ctx, in)
	}
	info := workflow.GetInfo(ctx)
	run := r.t.child(wfSpan.sc, "run", info.Namespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	r.run = run
	ctx = r.t.withSpan(ctx, run)
	ctx = wftrace.With(ctx, &stepTracer{t: r.t, run: run})
	res, err := r.Next.ExecuteWorkflow(ctx, in)
	if workflow.IsReplaying(ctx) {
		return res, err
	}
	status, msg := runStatus(res, err)
	ended, failed := workflow.Now(ctx), status != "passed" && status != "continued"
	attrs := []attribute.KeyValue{
		attribute.String("capflow.workflow_id", info.WorkflowExecution.ID),
		attribute.String("capflow.run_id", info.WorkflowExecution.RunID),
		attribute.String("capflow.workflow_type", info.WorkflowType.Name),
		attribute.String("capflow.status", status),
	}
	if cr, ok := res.(*capclient.Result); ok && cr != nil {
		attrs = append(attrs, attribute.String("capflow.plan", cr.Plan))
	}
	// The parent first: a collector that has the run span has its parent
	// (the exporter sends in order; CI saw the run span's batch arrive
	// alone).
	r.t.export(wfSpan.parent, wfSpan.sc, wfSpan.name, wfSpan.start, ended, failed, msg, wfSpan.attrs)
	r.t.export(wfSpan.sc, run, "run "+info.WorkflowExecution.ID, info.WorkflowStartTime, ended, failed, msg, attrs)
	return res, err
}

// ExecuteUpdate traces an update (pause, resume, decide) beneath the run
// span, once: when it completes on a worker that is not replaying.
func (r *runInbound) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	start := workflow.Now(ctx)
	res, err := r.Next.ExecuteUpdate(ctx, in)
	if !r.run.IsValid() || workflow.IsReplaying(ctx) {
		return res, err
	}
	id := workflow.GetCurrentUpdateInfo(ctx).ID
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r.t.export(r.run, r.t.child(r.run, "update", id), "HandleUpdate:"+in.Name, start, workflow.Now(ctx), err != nil, msg,
		[]attribute.KeyValue{attribute.String("temporalUpdateID", id)})
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
	switch r := res.(type) {
	case *capclient.Result:
		if r != nil {
			return string(r.Status), r.Message
		}
	case *wfapi.ItemsResult:
		failed := 0
		for _, it := range r.Items {
			if it.Status == wfapi.StepFailed {
				failed++
			}
		}
		if failed > 0 {
			return "failed", fmt.Sprintf("%d items of the batch failed", failed)
		}
	}
	return "passed", ""
}

// stepTracer gives each step a span beneath the run's.
type stepTracer struct {
	t   *Tracing
	run trace.SpanContext
}

func (s *stepTracer) StepContext(ctx workflow.Context, id string, run int) workflow.Context {
	return s.t.withSpan(ctx, s.step(id, run))
}

// step is the span context of a step's run-th run.
func (s *stepTracer) step(id string, run int) trace.SpanContext {
	if run == 0 {
		return s.t.child(s.run, "step", id)
	}
	return s.t.child(s.run, "step", id, strconv.Itoa(run))
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
	s.t.export(s.run, s.step(st.ID, st.Run), st.ID, st.Start, st.End, failed, st.Message, attrs)
}

// child is the span context of a span beneath parent identified by parts.
func (t *Tracing) child(parent trace.SpanContext, parts ...string) trace.SpanContext {
	ids := derive(append([]string{parent.SpanID().String()}, parts...)...)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: parent.TraceID(), SpanID: ids.span,
		TraceFlags: parent.TraceFlags(), TraceState: parent.TraceState()})
}

// withSpan is ctx with sc as the parent of the spans Temporal's
// interceptor starts from it.
func (t *Tracing) withSpan(ctx workflow.Context, sc trace.SpanContext) workflow.Context {
	ref := t.temporal.SpanFromContext(trace.ContextWithSpanContext(context.Background(), sc))
	return workflow.WithValue(ctx, t.key, ref)
}

// export sends a span that ended: sc beneath parent (none when invalid),
// from start to end.
func (t *Tracing) export(parent, sc trace.SpanContext, name string, start, end time.Time, failed bool, msg string, attrs []attribute.KeyValue) {
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx = withIDs(ctx, fixedIDs{trace: sc.TraceID(), span: sc.SpanID()})
	_, span := t.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if failed {
		span.SetStatus(codes.Error, msg)
	}
	span.End(trace.WithTimestamp(end))
}
