package builtin

import (
	"context"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// Budgets of the builtins that evaluate user programs (json.query, and
// text.render's templates), each in a child process (internal/childproc):
// whatever the program, it ends within its time, and its memory is the
// child's, whose address space the kernel caps.
const (
	EvalTimeout = 30 * time.Second
	EvalMemory  = 256 << 20
)

// evalTime is the time budget in force (tests lower it to reach it).
var evalTime = EvalTimeout

// evalMemory is the memory budget in force (tests lower it: under the
// race detector, allocating 256 MiB takes half a minute).
var evalMemory uint64 = EvalMemory

// budgetErr explains why an evaluation under budget stopped, or returns
// nil when it did not stop for its budget. outer is the step's context.
func budgetErr(outer, ctx context.Context, what string) error {
	switch {
	case outer.Err() != nil:
		return ctxErr(outer, what)
	case ctx.Err() != nil:
		return overTime(what)
	}
	return nil
}

// overTime is an evaluation stopped at its time budget: a limit of the
// evaluators', not the step's, which no timeout raises and another attempt
// would only meet again, so RESOURCE_EXHAUSTED (not retried), where the
// step's own time running out is TASK_TIMEOUT.
func overTime(what string) error {
	return caperr.New(caperr.ResourceExhausted, "%s ran longer than %s, the evaluators' time limit: stopped; it must do less (no step timeout raises this limit)", what, evalTime)
}
