// Package telemetry exports OpenTelemetry traces of runs over OTLP/HTTP
// (docs/observability.md): Temporal's own spans through the SDK's
// OpenTelemetry interceptor, and capflow's spans for each run, step and
// attempt beneath them. Spans carry identifiers, names, statuses and error
// codes, never a step's inputs or outputs.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/logging"
)

// TracesPath is added to telemetry.otlp_endpoint, as OTLP's base
// endpoint variable (OTEL_EXPORTER_OTLP_ENDPOINT) has it.
const TracesPath = "/v1/traces"

// Tracing is a process's tracing. A nil *Tracing is tracing turned off:
// every method works and does nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	// temporal is the SDK's OpenTelemetry tracer, made deterministic for
	// workflow spans (runTracer); key is where it keeps spans on a
	// workflow context.
	temporal interceptor.Tracer
	key      any
}

// spanKey is the workflow-context key of Temporal's interceptor here:
// capflow's run and step spans are set there so that what they start
// becomes their children.
type spanKey struct{}

// Setup starts exporting to cfg's endpoint under service; nil, nil when
// no endpoint is configured. Export failures are logged on stderr (a
// collector that is down never stops a run).
func Setup(cfg config.Telemetry, service string) (*Tracing, error) {
	if cfg.OTLPEndpoint == "" {
		return nil, nil
	}
	endpoint, err := TracesURL(cfg.OTLPEndpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, caperr.Wrap(caperr.ConfigError, err, "telemetry.otlp_endpoint")
	}
	if cfg.ServiceName != "" {
		service = cfg.ServiceName
	}
	handleErrors(endpoint)
	return newTracing(sdktrace.WithBatcher(exp), service)
}

// WithExporter is tracing that hands each span, as it ends, to exp (tests
// read what a run exports).
func WithExporter(exp sdktrace.SpanExporter, service string) (*Tracing, error) {
	return newTracing(sdktrace.WithSyncer(exp), service)
}

func newTracing(export sdktrace.TracerProviderOption, service string) (*Tracing, error) {
	provider := sdktrace.NewTracerProvider(export, sdktrace.WithIDGenerator(&idGenerator{}),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
	t := &Tracing{provider: provider, tracer: provider.Tracer("capflow"), key: spanKey{}}
	inner, err := temporalotel.NewTracer(temporalotel.TracerOptions{
		Tracer: provider.Tracer("temporal-sdk-go"), SpanContextKey: t.key, DisableBaggage: true,
		// The CLI and the console ask a run's progress every few hundred
		// milliseconds: a span each would bury the run's own.
		DisableQueryTracing: true,
		// A malformed parent from some client must not fail its workflow.
		AllowInvalidParentSpans: true,
		// The SDK exports update spans again on every replay: runInbound
		// traces updates itself.
		DisableUpdateTracing: true,
	})
	if err != nil {
		return nil, err
	}
	t.temporal = &runTracer{Tracer: inner, otel: t.tracer}
	return t, nil
}

// handleErrors sends OpenTelemetry's export errors to a log of this
// process, once: OpenTelemetry's handler is global, and the MCP server runs
// many commands in one process, each with its own Setup.
func handleErrors(endpoint string) {
	errorsOnce.Do(func() {
		log := logging.New("capflow-telemetry", os.Stderr, hclog.Warn)
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("trace export failed", "endpoint", endpoint, "error", err)
		}))
	})
}

var errorsOnce sync.Once

// TracesURL is the URL spans are posted to: the endpoint with
// TracesPath added, unless it ends with it.
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", caperr.New(caperr.ConfigError, "telemetry.otlp_endpoint %q is not an http:// or https:// URL like http://127.0.0.1:4318", endpoint)
	}
	if u.User != nil {
		// The endpoint is logged; a collector's token belongs in a header.
		return "", caperr.New(caperr.ConfigError, "telemetry.otlp_endpoint must not carry credentials: set OTEL_EXPORTER_OTLP_HEADERS instead")
	}
	if !strings.HasSuffix(u.Path, TracesPath) {
		u.Path = strings.TrimRight(u.Path, "/") + TracesPath
	}
	return u.String(), nil
}

// Interceptors are the interceptors of a traced client and its workers:
// Temporal's spans, then capflow's run and step spans inside them.
func (t *Tracing) Interceptors() []interceptor.Interceptor {
	if t == nil {
		return nil
	}
	return []interceptor.Interceptor{interceptor.NewTracingInterceptor(t.temporal), &workflowInterceptor{t: t}}
}

// ClientOption adds the interceptors to a client's options.
func (t *Tracing) ClientOption() func(*client.Options) {
	return func(o *client.Options) {
		for _, i := range t.Interceptors() {
			o.Interceptors = append(o.Interceptors, i)
		}
	}
}

// Tracer is capflow's tracer (a no-op one when tracing is off).
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer("capflow")
	}
	return t.tracer
}

// Shutdown exports what is buffered, waiting at most wait.
func (t *Tracing) Shutdown(wait time.Duration) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("exporting the last spans: %w", err)
	}
	return nil
}

// TraceID is the trace ctx's span belongs to ("" when none).
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
