// Package verdict is what a plan check concludes, as the workflow and
// its clients carry it: the plan's status and its problems, each where it
// is. A leaf package: the workflow code reads it without the checker.
package verdict

import (
	"github.com/capflow/capflow/wire"
)

// Plan statuses (docs/plans.md).
const (
	Ready           = "ready"
	PartialComplete = "partial-complete"
	BlockedByPolicy = "blocked_by_policy"
	Invalid         = "invalid"
)

// Problem is one problem of a plan or an input, where it is: the wire's
// type, defined once.
type Problem = wire.Problem
