package builtin

import (
	"context"
	"errors"
	"runtime/metrics"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// Budgets of the builtins that evaluate user programs (json.query, and
// text.render's templates): whatever the program, it ends within its time
// and stops before the process's heap grows past the memory budget.
const (
	EvalTimeout = 30 * time.Second
	EvalMemory  = 256 << 20
)

// evalMemory is the memory budget in force (tests lower it: under the
// race detector, allocating 256 MiB takes half a minute).
var evalMemory uint64 = EvalMemory

var errOverBudget = errors.New("memory budget exceeded")

const heapMetric = "/memory/classes/heap/objects:bytes"

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// budget returns a context that ends at the step's own deadline, after
// EvalTimeout, or when the heap has grown by more than EvalMemory since
// the call (sampled every few milliseconds: a runaway program is stopped
// within a few MiB of the budget). The heap is the process's, so the
// budget is deliberately generous: other steps share it.
func budget(ctx context.Context) (context.Context, func()) {
	ctx, cancelT := context.WithTimeout(ctx, EvalTimeout)
	ctx, cancel := context.WithCancelCause(ctx)
	start := heapBytes()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if h := heapBytes(); h > start && h-start > evalMemory {
					cancel(errOverBudget)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil); cancelT() }
}

// budgetErr explains why an evaluation under budget stopped, or returns
// nil when it did not stop for its budget. outer is the step's context.
func budgetErr(outer, ctx context.Context, what string) error {
	switch {
	case outer.Err() != nil:
		return ctxErr(outer, what)
	case errors.Is(context.Cause(ctx), errOverBudget):
		return caperr.New(caperr.ResourceExhausted, "%s needs more than %s of memory (the memory limit): stopped", what, humanBytes(int64(evalMemory)))
	case ctx.Err() != nil:
		return caperr.New(caperr.TaskTimeout, "%s ran longer than %s: stopped", what, EvalTimeout)
	}
	return nil
}
