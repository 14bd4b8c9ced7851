package plan

import "time"

// StepSettings are the effective execution settings of one step: step > tool
// manifest > plan defaults > built-in defaults (preflight.Settings).
type StepSettings struct {
	Timeout         time.Duration `json:"timeout"`
	Heartbeat       time.Duration `json:"heartbeat"`
	MaxAttempts     int           `json:"max_attempts"`
	InitialInterval time.Duration `json:"initial_interval"`
	Backoff         float64       `json:"backoff"`
	MaxInterval     time.Duration `json:"max_interval"`
}

// Clamp limits attempts to the policy's max_tool_retries (+1 for the first
// attempt) and non-idempotent tools to a single attempt: such a tool is
// never retried after it has started.
func (st StepSettings) Clamp(maxToolRetries int, idempotent bool) StepSettings {
	if maxToolRetries >= 0 && st.MaxAttempts > maxToolRetries+1 {
		st.MaxAttempts = maxToolRetries + 1
	}
	if !idempotent {
		st.MaxAttempts = 1
	}
	return st
}
