// Package embed runs a capflow worker inside a Go service, on the
// service's own Temporal client. Runs the service starts through the
// worker's Client can start eagerly (client.StartOptions.Eager): the
// server hands the run's first workflow task back in the start's answer,
// to this worker, without a poll (docs/embedding.md).
package embed

import (
	"context"

	"github.com/hashicorp/go-hclog"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/workerapp"
)

// Options are an embedded worker's.
type Options struct {
	// Project is the project folder (its capflow.yaml, tools and plans;
	// "" the current folder).
	Project string
	// TaskQueue overrides the configuration's temporal.task_queue.
	TaskQueue string
	// Logger gets the worker's logs (nil: none).
	Logger hclog.Logger
}

// Worker is a capflow worker running in this process.
type Worker struct {
	w  *workerapp.Embedded
	tc sdkclient.Client
}

// Start starts a worker on tc for the project: capflow's workflows and
// activities on the task queue, the run steps on this host's queue.
func Start(ctx context.Context, tc sdkclient.Client, o Options) (*Worker, error) {
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	dir := o.Project
	if dir == "" {
		dir = "."
	}
	w, err := workerapp.Embed(ctx, tc, dir, o.TaskQueue, log)
	if err != nil {
		return nil, err
	}
	return &Worker{w: w, tc: tc}, nil
}

// Client starts and steers runs on this worker's task queue (through the
// same Temporal client: the one eager starts need).
func (w *Worker) Client(opts ...client.Option) *client.Client {
	return client.New(w.tc, w.w.Queue, opts...)
}

// Stop stops the worker once its running steps have stopped.
func (w *Worker) Stop() { w.w.Stop() }
