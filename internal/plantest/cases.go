package plantest

import (
	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/wire"
)

// Case is one test case: the run's inputs, what steps answer, and what
// the run must come to.
type Case struct {
	Name   string
	Inputs map[string]any
	// Steps are given results by step id, or "id[i]" for one item.
	Steps  map[string]Given
	Expect Expect
	// Line is where the case starts in its file.
	Line int
}

// Given is what a step answers in a case.
type Given struct {
	Data     any
	HasData  bool
	Error    *GivenError
	Decision *GivenDecision
	// Model: an agent step's model answers, in order (docs/agents.md).
	Model []llm.Response
}

// GivenError is a step's failure.
type GivenError struct {
	Code    string
	Message string
}

// GivenDecision answers a waiting step: approved (flow.approve), or an
// action (retry, skip, fail; approve, reject).
type GivenDecision struct {
	Approved *bool
	Action   string
	By       string
	Comment  string
}

func (g *GivenDecision) request(step string) wire.DecideRequest {
	action := wire.Action(g.Action)
	if g.Approved != nil {
		action = wire.ActionApprove
		if !*g.Approved {
			action = wire.ActionReject
		}
	}
	by := g.By
	if by == "" {
		by = "plan test"
	}
	return wire.DecideRequest{Step: step, Action: action, By: by, Comment: g.Comment}
}

// Expect is what a case's run must come to.
type Expect struct {
	Status  string
	Steps   map[string]string
	Outputs map[string]any
	// Order: pairs of steps, the first ended before the second started.
	Order [][2]string
	// Next: the steps the run's "what to do next" names, each with its
	// code (RETRY_EXHAUSTED after retries); all of them, nil: not checked.
	Next map[string]string
}
