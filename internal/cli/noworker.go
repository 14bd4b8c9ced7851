package cli

import (
	"context"
	"fmt"
	"time"

	capflowclient "github.com/capflow/capflow/client"
)

// NoWorkerAfter is how long a command waits on a run before it checks
// that some worker polls the run's task queue.
var NoWorkerAfter = 5 * time.Second

// warnNoWorker says on stderr, once, when no worker polls queue (checked
// after NoWorkerAfter, then every 10 s while ctx lasts): a run on a queue
// nobody polls waits silently otherwise. The command keeps waiting; the
// returned func stops the watch (and waits for it: nothing is written
// after the command's own last words). then, if any, is said after.
func (a *App) warnNoWorker(ctx context.Context, tc *capflowclient.Client, queue, then string) func() {
	ctx, cancel := context.WithCancel(ctx)
	if queue == "" {
		queue = tc.TaskQueue()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait := NoWorkerAfter
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = 10 * time.Second
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			n, err := tc.Pollers(qctx, queue)
			cancel()
			if err == nil && n == 0 && ctx.Err() == nil {
				fmt.Fprintf(a.Stderr, "⚠ no worker polls task queue %s: start capflow-worker --task-queue %s (in capflow's repository, make dev starts one); still waiting, Ctrl-C stops waiting\n", queue, queue)
				if then != "" {
					fmt.Fprintf(a.Stderr, "  %s\n", then)
				}
				return
			}
			if err == nil && n > 0 {
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}
