// Package workerapp wires the capflow worker: configuration, logger,
// Temporal client, search attributes, registrations, graceful shutdown.
package workerapp

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/activities"
	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/logging"
	"github.com/capflow/capflow/internal/mcpclient"
	"github.com/capflow/capflow/internal/metrics"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/sandbox"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/telemetry"
	"github.com/capflow/capflow/internal/temporalx"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/workflows"
	"github.com/capflow/capflow/workflows/agentrun"
	"github.com/capflow/capflow/workflows/limit"
)

// Version is set at build time with -ldflags (the MCP client's version).
var Version = "dev"

// Register registers the workflow and activities on a worker (or any
// registry, e.g. a test environment).
func Register(w worker.Registry, acts *activities.Activities) {
	w.RegisterWorkflowWithOptions(workflows.PlanWorkflow, workflow.RegisterOptions{Name: wfapi.WorkflowType})
	w.RegisterWorkflowWithOptions(workflows.ItemsWorkflow, workflow.RegisterOptions{Name: wfapi.ItemsWorkflowType})
	w.RegisterWorkflowWithOptions(limit.Workflow, workflow.RegisterOptions{Name: wfapi.LimitWorkflowType})
	w.RegisterWorkflowWithOptions(agentrun.Workflow, workflow.RegisterOptions{Name: wfapi.AgentWorkflowType})
	// Batches of inline steps, local activities of the workflow's worker.
	w.RegisterActivityWithOptions(acts.RunInline, activity.RegisterOptions{Name: wfapi.RunInlineActivity})
	w.RegisterActivityWithOptions(acts.Resolve, activity.RegisterOptions{Name: wfapi.ResolveActivity})
	w.RegisterActivityWithOptions(acts.Route, activity.RegisterOptions{Name: wfapi.RouteActivity})
	w.RegisterActivityWithOptions(acts.AgentTurn, activity.RegisterOptions{Name: wfapi.AgentTurnActivity})
	w.RegisterActivityWithOptions(acts.Host, activity.RegisterOptions{Name: wfapi.HostActivity})
	// The shared queue runs host activities too: runs recorded before host
	// queues, and tools that name no queue of their own, still need them.
	RegisterHostActivities(w, acts)
}

// RegisterHostActivities registers what runs on a worker's host queue: the
// activities that read or write the run's folder or its processes.
func RegisterHostActivities(w worker.Registry, acts *activities.Activities) {
	w.RegisterActivityWithOptions(acts.RunTool, activity.RegisterOptions{Name: wfapi.RunToolActivity})
	w.RegisterActivityWithOptions(acts.Evaluate, activity.RegisterOptions{Name: wfapi.EvaluateActivity})
	w.RegisterActivityWithOptions(acts.Finalize, activity.RegisterOptions{Name: wfapi.FinalizeActivity})
	w.RegisterActivityWithOptions(acts.LoadSteps, activity.RegisterOptions{Name: wfapi.LoadStepsActivity})
	w.RegisterActivityWithOptions(acts.Checkpoint, activity.RegisterOptions{Name: wfapi.CheckpointActivity})
	w.RegisterActivityWithOptions(acts.PutBlob, activity.RegisterOptions{Name: wfapi.PutBlobActivity})
	w.RegisterActivityWithOptions(acts.GetBlob, activity.RegisterOptions{Name: wfapi.GetBlobActivity})
}

// HostQueue is this host's own task queue for a project: the queue name,
// the host name and a digest of the project's folder (two projects, or two
// copies of one, on a host are two hosts to capflow: their run folders
// differ).
func HostQueue(queue, root string) string {
	host, _ := os.Hostname()
	if host == "" {
		host = "host"
	}
	abs, _ := filepath.Abs(root)
	sum := sha256.Sum256([]byte(host + "\x00" + abs))
	return fmt.Sprintf("%s@%s-%x", queue, host, sum[:4])
}

// Main runs the worker until SIGINT/SIGTERM and returns the exit code.
func Main(args []string, stderr io.Writer) int {
	f, ok := parseFlags(args, stderr)
	if !ok {
		return 2
	}
	log := logging.New("capflow-worker", stderr, hclog.Info)
	cfg, ok := configure(f, log)
	if !ok {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer profile(ctx)()
	var ready atomic.Pointer[readiness]
	ready.Store(&readiness{err: errors.New("starting")})
	ms, err := startMetrics(f.metricsAddr, &ready, log)
	if err != nil {
		log.Error("metrics", "error", err.Error())
		return 2
	}
	if ms != nil {
		defer ms.Close()
	}
	tracing, err := telemetry.Setup(cfg.Telemetry, "capflow-worker")
	if err != nil {
		log.Error("configuration", "error", err.Error())
		return 2
	}
	// Deferred before the client's close: runs after it, when the workers
	// have stopped and their last spans ended.
	defer func() {
		if err := tracing.Shutdown(5 * time.Second); err != nil {
			log.Warn("telemetry", "error", err.Error())
		}
	}()
	c, err := temporalx.Dial(ctx, cfg, log.Named("temporal"), tracing.ClientOption(), temporalx.HoldActivityEnds(log.Named("temporal")), func(o *client.Options) {
		if ms != nil {
			o.MetricsHandler = ms.Handler
		}
	})
	if err != nil {
		log.Error("cannot start", "error", err.Error())
		return 1
	}
	defer c.Close()
	proj := project.New(cfg, log, stderr)
	if ms != nil {
		proj.AddService("the worker's metrics", ms.Addr)
	}
	if f.consoleAddr != "" {
		if err := serveConsole(ctx, f.consoleAddr, f.consoleToken, c, proj, log); err != nil {
			log.Error("console", "error", err.Error())
			return 2
		}
	}
	store, err := proj.Artifacts(ctx)
	if err != nil {
		log.Error("artifact store", "error", err.Error())
		return 2
	}
	defer store.Close()
	mcp := proj.MCP(Version)
	defer mcp.Close()
	acts := newActivities(ctx, cfg, c, proj, store, mcp, tracing.Tracer(), log)
	// Warm the registry now so manifest problems show at start-up.
	if reg, err := registryCheck(acts); err != nil {
		log.Error("registry", "error", err.Error())
		return 2
	} else {
		log.Info("registry loaded", "summary", reg)
	}
	stopWorkers, err := startWorkers(c, cfg, acts, log)
	if err != nil {
		log.Error("worker failed to start", "error", err)
		return 1
	}
	ready.Store(&readiness{client: c, acts: acts})
	if acts.SearchAttributes {
		go temporalx.KeepSearchAttributes(ctx, c, cfg.Temporal.Namespace, searchAttrCheck, log)
	}
	// Logged once both workers poll and /healthz says ok: scripts and
	// tests wait for this line before they start runs.
	startedLine(log, cfg, acts, proj, store.Where, "address", cfg.Temporal.Address, "traces", tracesTo(cfg))
	<-ctx.Done()
	ready.Store(&readiness{client: c, acts: acts, err: errors.New("shutting down")})
	log.Info("shutting down")
	stopWorkers()
	return 0
}

// searchAttrCheck is how often a worker checks the server still has
// capflow's search attributes.
const searchAttrCheck = 15 * time.Second

// newActivities is what the worker runs steps and runs with.
func newActivities(ctx context.Context, cfg *config.Config, c client.Client, proj *project.Project, store *artifacts.Store, mcp *mcpclient.Pool, tracer trace.Tracer, log hclog.Logger) *activities.Activities {
	exec := &step.Executor{Project: proj, Logger: log, Artifacts: store, HostQueue: HostQueue(cfg.Temporal.TaskQueue, cfg.Root),
		Tool:  &toolrun.Runner{Logger: log.Named("toolrun"), MCP: mcp, Protected: proj.Config.Protected(), Private: proj.Config.Private()},
		Slots: &activities.Slots{Client: c, Queue: cfg.Temporal.TaskQueue}}
	acts := &activities.Activities{
		Project: proj, Exec: exec, Logger: log,
		SearchAttributes: temporalx.EnsureSearchAttributes(ctx, c, cfg.Temporal.Namespace, log),
		Router:           NewRouter(proj),
		SegmentEvents:    cfg.Temporal.SegmentEvents,
		Heartbeats:       c,
		Tracer:           tracer,
	}
	acts.HostWait, _ = time.ParseDuration(cfg.Temporal.HostWait)
	return acts
}

// startWorkers starts the worker of the task queue (workflows and
// capflow's own activities) and of this host's queue (a run's steps go to
// the host that resolved it, where its folder and its processes are:
// docs/operations.md). The returned func stops both.
func startWorkers(c client.Client, cfg *config.Config, acts *activities.Activities, log hclog.Logger) (func(), error) {
	opts := worker.Options{
		// Give running tools time to stop (SIGTERM, grace, SIGKILL) on shutdown.
		WorkerStopTimeout: 10 * time.Second,
		// Heartbeats carry cancellations to running tools: keep the SDK's
		// throttle short so `capflow cancel` acts within seconds.
		DefaultHeartbeatThrottleInterval: time.Second,
		// 2 s: a step with a heartbeat timeout (command tools get one by
		// default) shows its live lines as often as one without (RunTool
		// beats every 2 s), not once per 0.8 of its timeout.
		MaxHeartbeatThrottleInterval: 2 * time.Second,
	}
	hostOpts := opts
	if cfg.Temporal.EagerSteps {
		// What the runs this worker resolves count on (wfapi.EagerPerTask).
		acts.EagerSteps, opts.MaxEagerActivityReservationsPerWorkflowTask = wfapi.EagerPerTask, new(wfapi.EagerPerTask)
	}
	if name := buildName(); name != "" {
		// The build's name in each workflow task's completion. Without it
		// the SDK hashes the worker's whole binary at start (160 MB: a
		// fifth of a second of CPU every start).
		worker.SetBinaryChecksum(name)
	}
	w := worker.New(c, cfg.Temporal.TaskQueue, opts)
	Register(w, acts)
	// Inline json.query and text.render steps need an evaluator child
	// ready: never started inside a workflow task (builtin.Pure declines
	// meanwhile). Readied before the worker polls, so the first run's steps
	// are inline too (a loaded machine took longer than a run's first task
	// to start a child).
	builtin.Prepare()
	hw := worker.New(c, acts.Exec.HostQueue, hostOpts)
	RegisterHostActivities(hw, acts)
	if swept := sandbox.SweepOrphans(); len(swept) > 0 {
		// A worker killed while a sandbox started left its init behind.
		log.Warn("stopped sandboxes a dead worker left behind", "pids", swept)
	}
	// Before the start-up line: it says whether steps are the zygote's.
	sandbox.Probe().Warm()
	if err := w.Start(); err != nil {
		return nil, err
	}
	if err := hw.Start(); err != nil {
		w.Stop()
		return nil, fmt.Errorf("host queue: %w", err)
	}
	return func() {
		hw.Stop()
		w.Stop()
		// Once the steps have stopped: their pooled cgroups go with the worker.
		sandbox.Probe().Drain()
	}, nil
}

// startMetrics serves /metrics and /healthz on addr (nil: addr is "").
// It starts before the dial so the SDK's client metrics go to it;
// /healthz answers "unhealthy" until the worker runs.
func startMetrics(addr string, ready *atomic.Pointer[readiness], log hclog.Logger) (*metrics.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ms, err := metrics.Start(addr, map[string]metrics.Check{
		"worker": func(context.Context) error { return ready.Load().err },
		"registry": func(context.Context) error {
			r := ready.Load()
			if r.acts == nil {
				return errors.New("not loaded yet")
			}
			_, err := r.acts.Project.Registry()
			return err
		},
		"temporal": func(ctx context.Context) error {
			r := ready.Load()
			if r.client == nil {
				return errors.New("not connected yet")
			}
			_, err := r.client.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
	}, log.Named("metrics"))
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %v", addr, err)
	}
	log.Info("metrics and health", "metrics", "http://"+ms.Addr+"/metrics", "healthz", "http://"+ms.Addr+"/healthz")
	return ms, nil
}

// readiness is what /healthz reports on: the client once dialled, the
// activities once the registry loaded, and why the worker is not running
// (nil: it runs).
type readiness struct {
	client client.Client
	acts   *activities.Activities
	err    error
}

func registryCheck(a *activities.Activities) (string, error) {
	reg, err := a.Project.Registry()
	if err != nil {
		return "", err
	}
	for _, p := range reg.Problems {
		a.Logger.Warn("manifest problem", "problem", p.Error())
	}
	return fmt.Sprint(reg.Summary()), nil
}

// startedLine logs that the worker polls, with what it found (more:
// further key-value pairs).
func startedLine(log hclog.Logger, cfg *config.Config, acts *activities.Activities, proj *project.Project, artifacts string, more ...any) {
	kv := []any{"payloads", payloadsSummary(), "sandbox", sandboxSummary(proj), "artifacts", artifacts, "task_queue", cfg.Temporal.TaskQueue,
		"host_queue", acts.Exec.HostQueue, "namespace", cfg.Temporal.Namespace, "project", cfg.Root, "config", configFile(cfg)}
	log.Info("worker started", append(kv, more...)...)
}

// sandboxSummary is the start-up line's word on confinement: the policy's
// mode and what the machine offers (docs/sandbox.md).
func sandboxSummary(proj *project.Project) string {
	sbx := sandbox.Probe().Summary()
	if pol, err := proj.Policy(); err == nil {
		sbx = "policy " + pol.Sandbox.String() + "; " + sbx
	}
	return sbx
}

// heapOnSignal writes a heap profile to file on each SIGUSR1 until ctx ends.
func heapOnSignal(ctx context.Context, file string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	defer signal.Stop(sig)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			if out, err := os.Create(file); err == nil {
				_ = pprof.WriteHeapProfile(out)
				_ = out.Close()
			}
		}
	}
}
