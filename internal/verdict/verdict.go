// Package verdict is what a plan check concludes, as the workflow and
// its clients carry it: the plan's status and its problems, each where it
// is. A leaf package: the workflow code reads it without the checker.
package verdict

import (
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/wire"
)

// Plan statuses (docs/plans.md).
const (
	Ready           = "ready"
	PartialComplete = "partial-complete"
	BlockedByPolicy = "blocked_by_policy"
	Invalid         = "invalid"
)

// Problem is one problem of a plan or an input, where it is.
type Problem struct {
	File    string      `json:"file,omitempty"`
	Line    int         `json:"line,omitempty"`
	Column  int         `json:"column,omitempty"`
	Field   string      `json:"field,omitempty"`
	Message string      `json:"message"`
	Code    caperr.Code `json:"code"`
}

// Wire is p as clients read it.
func (p Problem) Wire() wire.Problem {
	return wire.Problem{File: p.File, Line: p.Line, Column: p.Column, Field: p.Field, Message: p.Message, Code: wire.ErrorCode(p.Code)}
}

// WireProblems converts problems; nil stays nil.
func WireProblems(ps []Problem) []wire.Problem {
	if ps == nil {
		return nil
	}
	out := make([]wire.Problem, len(ps))
	for i, p := range ps {
		out[i] = p.Wire()
	}
	return out
}
