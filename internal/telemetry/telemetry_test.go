package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
)

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":           "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":          "http://127.0.0.1:4318/v1/traces",
		"https://otel.example.com/base":   "https://otel.example.com/base/v1/traces",
		"http://collector:4318/v1/traces": "http://collector:4318/v1/traces",
		"ftp://collector:4318":            "",
		"collector:4318":                  "",
		"http://":                         "",
	} {
		got, err := TracesURL(in)
		if want == "" {
			if caperr.CodeOf(err) != caperr.ConfigError {
				t.Errorf("TracesURL(%q) = %q, %v; want a CONFIG_ERROR", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("TracesURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// Off: no endpoint, no tracing, and a nil *Tracing still works.
func TestTracingOff(t *testing.T) {
	tr, err := Setup(config.Telemetry{}, "x")
	if err != nil || tr != nil {
		t.Fatalf("Setup without an endpoint = %v, %v", tr, err)
	}
	if tr.Interceptors() != nil || tr.Shutdown(0) != nil || tr.Tracer() == nil {
		t.Fatal("a nil *Tracing must do nothing")
	}
}

// The run's own span is the same span on every worker that replays it:
// IDs derived from the run, the trace of a parent when there is one, else
// a trace derived from the run.
func TestRunWorkflowSpansAreDeterministic(t *testing.T) {
	tr, err := Setup(config.Telemetry{OTLPEndpoint: "http://127.0.0.1:9"}, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(0) }()
	start := func(run string, parent interceptor.TracerSpanRef) trace.SpanContext {
		s, err := tr.temporal.StartSpan(&interceptor.TracerStartSpanOptions{Operation: "RunWorkflow", Name: "PlanWorkflow",
			Tags: map[string]string{workflowIDTag: "wf", runIDTag: run}, IdempotencyKey: "ignored:" + run, Parent: parent})
		if err != nil {
			t.Fatal(err)
		}
		return refContext(s)
	}
	a, b, other := start("k1", nil), start("k1", nil), start("k2", nil)
	if !a.IsValid() || a.TraceID() != b.TraceID() || a.SpanID() != b.SpanID() {
		t.Errorf("the same run gave two spans: %v %v", a, b)
	}
	if other.TraceID() == a.TraceID() || other.SpanID() == a.SpanID() {
		t.Errorf("two runs share IDs: %v %v", a, other)
	}
	parent := tr.temporal.SpanFromContext(trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{9, 9}, SpanID: trace.SpanID{7}, TraceFlags: trace.FlagsSampled})))
	if c := start("k1", parent); c.TraceID() != (trace.TraceID{9, 9}) || c.SpanID() != a.SpanID() {
		t.Errorf("with a parent: %v", c)
	}
	// Other spans are the SDK tracer's own: random.
	s1, _ := tr.temporal.StartSpan(&interceptor.TracerStartSpanOptions{Operation: "StartActivity", Name: "RunTool"})
	s2, _ := tr.temporal.StartSpan(&interceptor.TracerStartSpanOptions{Operation: "StartActivity", Name: "RunTool"})
	if refContext(s1).SpanID() == refContext(s2).SpanID() {
		t.Error("activity spans got the same ID")
	}
}
