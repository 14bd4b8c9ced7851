package client

import (
	"context"
	"fmt"
	"time"
)

// QueryWait bounds ProgressNow's query: within the 3 s a status answers
// in, whatever the run does (docs/run-control.md).
const QueryWait = 2500 * time.Millisecond

// NoWorker: no worker polls the run's task queue, so none answers how
// far it got.
type NoWorker struct{ ID, Queue string }

func (e *NoWorker) Error() string {
	return fmt.Sprintf("%s is open, but no worker polls its task queue %s to say how far it got: start capflow-worker --task-queue %s (in capflow's repository, make dev starts one)", e.ID, e.Queue, e.Queue)
}

// ProgressNow is the progress of an open run within QueryWait. A local
// step holds the run's workflow task, and the query with it, until it
// ends: when the query is not answered in time, the answer is what the
// server knows (the run's running activities; Busy set). A run no worker
// polls for is a *NoWorker.
func (r *Run) ProgressNow(ctx context.Context) (*Result, error) {
	qctx, cancel := context.WithTimeout(ctx, QueryWait)
	p, err := r.Progress(qctx)
	cancel()
	if err == nil || qctx.Err() == nil || ctx.Err() != nil {
		return p, err
	}
	info, derr := r.c.Describe(ctx, r.ID)
	if derr != nil {
		return nil, derr
	}
	if !info.Open {
		return r.Wait(ctx)
	}
	if n, perr := r.c.Pollers(ctx, info.TaskQueue); perr == nil && n == 0 {
		return nil, &NoWorker{ID: r.ID, Queue: info.TaskQueue}
	}
	return busyProgress(info, time.Now()), nil
}

// busyProgress is a run's progress while its workflow doesn't answer (its
// task busy with a local step, failing, or its worker gone): why, and its
// running activities, from the server.
func busyProgress(info *RunInfo, now time.Time) *Result {
	p := &Result{WorkflowID: info.ID, RunID: info.RunID, Plan: info.Plan, Status: StatusRunning, Busy: true, Steps: []StepResult{},
		Message: info.Task.Why(now) + ": its steps' states show once it answers (the steps below run as activities, as the server knows them)"}
	for _, pa := range info.Pending {
		if pa.Step != "" {
			p.Steps = append(p.Steps, StepResult{ID: pa.Step, Status: StepRunning, Attempts: int(pa.Attempt)})
		}
	}
	p.Live(info)
	return p
}
