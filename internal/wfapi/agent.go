package wfapi

import (
	"github.com/capflow/capflow/internal/agent"
	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/wire"
)

// An agent step runs as a child workflow of its run (docs/agents.md):
// each round an AgentTurn activity calls the model and compiles its
// answer, then the accepted calls run as a sub-plan.
const (
	AgentWorkflowType = "capflow-agent"
	AgentTurnActivity = "AgentTurn"
	// AgentQuery answers an agent step's rounds so far.
	AgentQuery = wire.AgentQuery
	// AgentGoal is the key of an agent step's goal in its resolved with.
	AgentGoal = "goal"
)

// AgentStep is a resolved agent step's block, its output schema and the
// plan's own policy (every round's plan narrows the project's with it).
type AgentStep struct {
	plan.Agent
	OutputSchema map[string]any   `json:"output_schema,omitempty"`
	Policy       *plan.PolicySpec `json:"policy,omitempty"`
}

// AgentInput starts an agent step.
type AgentInput struct {
	// Run is the parent run's workflow ID (its folder and records).
	Run     string    `json:"run"`
	Step    string    `json:"step"`
	Goal    string    `json:"goal"`
	Agent   AgentStep `json:"agent"`
	Lineage string    `json:"lineage,omitempty"`
	// ReuseFrom is a rerun's earlier run: its recorded answers are reused
	// while the requests are identical.
	ReuseFrom string `json:"reuse_from,omitempty"`
	// Grant is the rounds a person granted (the step's retries after a
	// breach): each adds a call and its share of each budget.
	Grant int `json:"grant,omitempty"`
	// Resume is where a retried step goes on from (its last stop).
	Resume *AgentResume `json:"resume,omitempty"`
}

// AgentResume is where an agent step stopped: the round it did not make,
// the conversation and the results that round would have sent, and the
// rounds and spending so far.
type AgentResume struct {
	Round        int           `json:"round"`
	Conversation string        `json:"conversation,omitempty"`
	Results      []llm.Message `json:"results,omitempty"`
	Run          wire.AgentRun `json:"run"`
}

// Spent is what an agent step's model calls used so far; AgentRound one
// of its rounds.
type (
	Spent      = wire.AgentSpent
	AgentRound = wire.AgentRound
)

// TurnInput is one round's model call. The first round carries the
// step's setup; it is stored with the conversation, and later rounds
// name the conversation alone (history grows by a round's results, not
// by its setup or its conversation).
type TurnInput struct {
	Setup *AgentInput `json:"setup,omitempty"`
	Round int         `json:"round"`
	// Conversation is the digest of the conversation so far in the
	// artifact store ("" in the first round); Results are the last
	// round's tool messages, appended to it.
	Conversation string        `json:"conversation,omitempty"`
	Results      []llm.Message `json:"results,omitempty"`
	Spent        Spent         `json:"spent"`
	// Grant: the rounds people granted so far (it grows with each retry;
	// the setup stored with the conversation is its first round's).
	Grant int `json:"grant,omitempty"`
}

// Conversation is what the artifact store keeps of an agent step's
// conversation: its setup and its messages.
type Conversation struct {
	Setup    AgentInput    `json:"setup"`
	Messages []llm.Message `json:"messages"`
}

// TurnResult is what history keeps of a model call: digests, model,
// tokens and cost, and the compiled proposal (never the conversation).
type TurnResult struct {
	Conversation string    `json:"conversation"`
	Request      string    `json:"request"`
	Response     string    `json:"response,omitempty"`
	CallID       string    `json:"call_id,omitempty"`
	Model        string    `json:"model,omitempty"`
	Usage        llm.Usage `json:"usage"`
	USD          float64   `json:"usd"`
	// Reused: the answer was recorded for an identical request (a retried
	// turn, or a rerun) and no model was called.
	Reused   bool           `json:"reused,omitempty"`
	Proposal agent.Proposal `json:"proposal"`
	// Breach names the budget the call could have passed: no call was made.
	Breach string `json:"breach,omitempty"`
	// Calls: the model calls this turn made, its failed tries included.
	Calls int `json:"calls,omitempty"`
}

// AgentResult is an agent step's end: its data (finish's arguments),
// or its error code and message, and its rounds.
type AgentResult struct {
	wire.AgentRun
	// Code is the step's error code ("" when it finished).
	Code     wire.ErrorCode `json:"code,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
	Message  string         `json:"message"`
	Problems []string       `json:"problems,omitempty"`
	// Resume is where a retry goes on from, when it stopped unfinished.
	Resume *AgentResume `json:"resume,omitempty"`
}

// Brief keeps of a round's result what its agent reads (agent.Results):
// the run's status and message, its report, and each step's outcome: its
// status, reason, and its envelope's message, data and error code. The
// rest is in the round's report.
func Brief(r *Result) {
	r.Gaps, r.Resolution, r.Policy, r.StepCounts = nil, nil, nil, nil
	for i, s := range r.Steps {
		b := StepResult{ID: s.ID, Status: s.Status, Reason: s.Reason, DataFile: s.DataFile}
		if e := s.Envelope; e != nil {
			b.Envelope = &wire.Envelope{Success: e.Success, Message: e.Message, Data: e.Data}
			if e.Error != nil {
				b.Envelope.Error = &wire.ErrorInfo{Code: e.Error.Code}
			}
		}
		r.Steps[i] = b
	}
}
