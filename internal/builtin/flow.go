package builtin

import (
	"context"

	"github.com/capflow/capflow/internal/caperr"
)

// flow.approve: a run never calls it, the workflow itself waits for the
// decision (no activity, no worker slot held). Called directly (`capflow
// tools run`), it says so.
const flowApprove = "flow.approve"

func init() {
	register(flowApprove, func(context.Context, map[string]any, *Env) (any, error) {
		return nil, caperr.New(caperr.InvalidInput, "flow.approve waits inside a run for a person's decision: use it as a plan step and answer with capflow approve RUN STEP")
	}, Traits{WaitsForPerson: true})
}
