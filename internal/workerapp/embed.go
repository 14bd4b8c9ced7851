package workerapp

import (
	"context"
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"
	"go.temporal.io/sdk/client"

	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/telemetry"
)

// Embedded is a capflow worker inside another Go program (package embed).
type Embedded struct {
	// Queue is the task queue it polls (temporal.task_queue, or the one
	// asked for).
	Queue string
	stop  func()
}

// Embed starts a worker on c for the project in dir (its capflow.yaml, or
// the defaults), polling queue ("" the configuration's): the task queue's
// worker and this host's, as capflow-worker starts them, without metrics,
// console, traces or signals (the program has its own).
func Embed(ctx context.Context, c client.Client, dir, queue string, log hclog.Logger) (*Embedded, error) {
	cfg, err := config.Load(config.Options{Project: dir})
	if err != nil {
		return nil, err
	}
	if queue != "" {
		cfg.Temporal.TaskQueue = queue
	}
	proj := project.New(cfg, log, io.Discard)
	store, err := proj.Artifacts(ctx)
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	mcp := proj.MCP(Version)
	var none *telemetry.Tracing
	acts := newActivities(ctx, cfg, c, proj, store, mcp, none.Tracer(), log)
	stopWorkers, err := func() (func(), error) {
		if _, err := registryCheck(acts); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		return startWorkers(c, cfg, acts, log)
	}()
	if err != nil {
		mcp.Close()
		store.Close()
		return nil, err
	}
	startedLine(log, cfg, acts, proj, store.Where, "embedded", true)
	return &Embedded{Queue: cfg.Temporal.TaskQueue, stop: func() {
		stopWorkers()
		mcp.Close()
		store.Close()
	}}, nil
}

// Stop stops the worker once its running steps have stopped.
func (e *Embedded) Stop() { e.stop() }
