package wire

// AgentRun is an agent step's conversation as people see it (docs/agents.md):
// each round's model call (digests in the artifact store, never the text),
// what it proposed, what was refused, the approval it waited for and the
// sub-plan its calls ran as, and what the step spent.
type AgentRun struct {
	Rounds []AgentRound `json:"rounds"`
	Spent  AgentSpent   `json:"spent"`
	// Breach names the budget a call could have passed (the step waits
	// for a person: retry grants one more round).
	Breach string `json:"breach,omitempty"`
}

// AgentSpent is what an agent step's model calls used.
type AgentSpent struct {
	LLMCalls int     `json:"llm_calls"`
	Tokens   int64   `json:"tokens"`
	USD      float64 `json:"usd"`
}

// AgentRound is one model call and what came of it.
type AgentRound struct {
	Round int `json:"round"`
	// Request and Response are sha256 digests in the artifact store.
	Request      string  `json:"request,omitempty"`
	Response     string  `json:"response,omitempty"`
	CallID       string  `json:"call_id,omitempty"`
	Model        string  `json:"model,omitempty"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	USD          float64 `json:"usd"`
	// Reused: the answer recorded for an identical request (a retried
	// call, a rerun) was used; no model was asked.
	Reused bool `json:"reused,omitempty"`
	// Calls are the proposal's calls, one line each; Refused its
	// problems (none of it ran).
	Calls    []string `json:"calls,omitempty"`
	Refused  []string `json:"refused,omitempty"`
	Finished bool     `json:"finished,omitempty"`
	// Approval is the proposal's digest when it waited for a person.
	Approval string `json:"approval,omitempty"`
	// SubRun is the child run its calls ran as.
	SubRun string `json:"sub_run,omitempty"`
	Breach string `json:"breach,omitempty"`
}
