// Package metrics serves a worker's Prometheus metrics and health check:
// the Temporal SDK's own metrics and capflow's (steps by status and
// capability, step durations, gaps by reason), all through one SDK metrics
// handler, so workflow code records them replay-safely (docs/operations.md).
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/capflow/capflow/client"

	"github.com/hashicorp/go-hclog"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/uber-go/tally/v4"
	"github.com/uber-go/tally/v4/prometheus"
	sdkclient "go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// DurationBuckets are the step duration histogram's upper bounds: a step
// takes from a millisecond (a builtin) to hours (a build).
// In seconds, as Prometheus counts them.
var DurationBuckets = []float64{0.005, 0.025, 0.1, 0.25, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// sanitize keeps names and label keys to what Prometheus accepts, as the
// SDK's own options do, but leaves the dots and dashes of label values
// (capability "video.convert", status "partial-complete", task queues)
// readable.
var sanitize = tally.SanitizeOptions{
	NameCharacters:       sdktally.PrometheusSanitizeOptions.NameCharacters,
	KeyCharacters:        sdktally.PrometheusSanitizeOptions.KeyCharacters,
	ValueCharacters:      tally.ValidCharacters{Ranges: tally.AlphanumericRange, Characters: []rune{'_', '.', '-', ':', '@', '/'}},
	ReplacementCharacter: tally.DefaultReplacementCharacter,
}

// Server is a started metrics endpoint.
type Server struct {
	// Handler goes to client.Options.MetricsHandler.
	Handler sdkclient.MetricsHandler
	// Addr is where it listens (the resolved address when given port 0).
	Addr   string
	srv    *http.Server
	closer interface{ Close() error }
}

// Check reports whether one part of the worker is healthy.
type Check func(ctx context.Context) error

// Start listens on addr and serves /metrics and /healthz. checks are
// run on every /healthz request, each with a 3 s budget; any failure
// answers 503 with the reasons.
func Start(addr string, checks map[string]Check, log hclog.Logger) (*Server, error) {
	// A registry of its own (not the process-wide default): the process
	// collectors come along, and two servers in one test process do not
	// collide.
	reg := prom.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reporter := prometheus.NewReporter(prometheus.Options{
		Registerer:              reg,
		DefaultTimerType:        prometheus.HistogramTimerType,
		DefaultHistogramBuckets: DurationBuckets,
		OnRegisterError: func(err error) {
			log.Warn("metric registration", "error", err)
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       prometheus.DefaultSeparator,
		SanitizeOptions: &sanitize,
	}, time.Second)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		closer.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", reporter.HTTPHandler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		status, body := health(r.Context(), checks)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	})
	// A plan's step (it carries client.PlanStepHeader) reads nothing here:
	// what runs and fails where is the operator's to know.
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(client.PlanStepHeader) != "" {
			http.Error(w, "a plan's step may not read the worker's metrics", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
	s := &Server{
		Handler: sdktally.NewMetricsHandler(scope),
		Addr:    ln.Addr().String(),
		srv:     &http.Server{Handler: guarded, ReadHeaderTimeout: 5 * time.Second},
		closer:  closer,
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "error", err)
		}
	}()
	return s, nil
}

// Close stops the endpoint.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.closer.Close()
	return err
}

// HealthBody is /healthz's answer.
type HealthBody struct {
	Status string            `json:"status"` // ok | unhealthy
	Checks map[string]string `json:"checks"` // name -> ok | the error
}

func health(ctx context.Context, checks map[string]Check) (int, HealthBody) {
	body := HealthBody{Status: "ok", Checks: map[string]string{}}
	code := http.StatusOK
	for name, check := range checks {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := check(cctx)
		cancel()
		if err != nil {
			body.Checks[name] = err.Error()
			body.Status, code = "unhealthy", http.StatusServiceUnavailable
			continue
		}
		body.Checks[name] = "ok"
	}
	return code, body
}
