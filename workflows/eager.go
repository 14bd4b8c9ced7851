package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// Eager steps (temporal.eager_steps, docs/performance.md): a step for the
// run's host makes its first attempt on the workflow's own task queue.
// The Go SDK asks the server to start such an activity on the worker that
// completes the workflow task, and a server with
// system.enableActivityEagerExecution hands it back in that answer: no
// trip through the server's task queues. That worker is the run's host
// while the run's workflow stays there (the host is the worker that
// resolved the run); a worker on another host refuses the attempt
// (ErrWrongHost) and the step runs on the host's queue, as do its further
// attempts (thenRegular).

// eagerWay makes a unit's first attempt on the workflow's queue while
// this workflow task has not sent as many as the SDK asks the server to
// start (past them a step would wait on the shared queue for any worker)
// and the run took changeEagerSteps (runs that did not ask record no
// marker); otherwise the unit runs the regular way. sent counts this
// task's; v is the version, once asked.
type eagerWay struct {
	sent  int
	v     workflow.Version
	asked bool
}

func (e *eagerWay) newTask() { e.sent = 0 }

func (e *eagerWay) start(d *dispatcher, u unit) workflow.Future {
	if !e.take(d) {
		return d.ways.regular.start(d, u)
	}
	*u.path = PathActivity
	opts := d.withinDeadline(u.opts, false)
	// No schedule-to-start timeout: the shared queue's wait says nothing
	// of the run's host.
	first := opts
	first.TaskQueue, first.ScheduleToStartTimeout = "", 0
	retry := *opts.RetryPolicy
	retry.MaximumAttempts = firstAttempts(wayEager, u.step.MaxAttempts, 0)
	first.RetryPolicy = &retry
	in := u.in
	in.Host, in.MaxAttempts = d.rr.HostQueue, int32(max(u.step.MaxAttempts, 1))
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(u.ctx, first), wfapi.RunToolActivity, in)
	in.MaxAttempts = 0
	return d.thenRegular(f, then{unit: unit{ctx: u.ctx, step: u.step, opts: opts, in: in, path: u.path}, tried: 1, first: wayEager})
}

// take reports whether one more unit of this task may start eagerly, and
// counts it.
func (e *eagerWay) take(d *dispatcher) bool {
	d.taskBegan()
	if e.sent >= d.p.eagerSteps {
		return false
	}
	if !e.asked {
		e.v, e.asked = versionOf(d.ctx, changeEagerSteps), true
	}
	if e.v < 1 {
		return false
	}
	e.sent++
	return true
}

// spend spends this workflow task's eager starts when it starts more
// steps than it may send eagerly (n ready): a fan-out waits on its slowest
// step, not on one hand-off, and its first few started eagerly only bunch
// the workflow tasks their ends bring.
func (e *eagerWay) spend(d *dispatcher, n int) {
	if d.p.eagerSteps > 0 && n > d.p.eagerSteps {
		d.taskBegan()
		e.sent = d.p.eagerSteps
	}
}
