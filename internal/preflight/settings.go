package preflight

import (
	"time"

	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
)

// Defaults used when neither step, plan nor tool says otherwise.
const (
	DefaultTimeout     = 10 * time.Minute
	DefaultMaxAttempts = 3
	DefaultInterval    = time.Second
	DefaultBackoff     = 2.0
	DefaultMaxInterval = time.Minute
	// CommandHeartbeat is the heartbeat timeout of a command tool that
	// declares none and may run past a minute: the worker beats every 2 s
	// anyway, and without a timeout a step whose worker died waited its
	// whole start-to-close (ten minutes by default) before its retry. A
	// minute, not less: a step that ends while the server restarts must
	// outlast the restart (30 s did not, on make cluster-test's PostgreSQL
	// server: the finished step ran again).
	CommandHeartbeat = time.Minute
)

// StepSettings are the effective execution settings of one step.
type StepSettings = plan.StepSettings

// Settings merges step > tool manifest > plan defaults > built-in
// defaults. on_failure fail or skip means one attempt: the step's
// failure is final at once.
func Settings(p *plan.Plan, s *plan.Step, m *manifest.Manifest) StepSettings {
	st := StepSettings{Timeout: DefaultTimeout, MaxAttempts: DefaultMaxAttempts, InitialInterval: DefaultInterval, Backoff: DefaultBackoff, MaxInterval: DefaultMaxInterval}
	layers := []manifest.Retry{p.Defaults.Retry}
	if p.Defaults.Timeout > 0 {
		st.Timeout = p.Defaults.Timeout.D()
	}
	if p.Defaults.Heartbeat > 0 {
		st.Heartbeat = p.Defaults.Heartbeat.D()
	}
	if m != nil {
		if m.Timeouts.StartToClose > 0 {
			st.Timeout = m.Timeouts.StartToClose.D()
		}
		if m.Timeouts.Heartbeat > 0 {
			st.Heartbeat = m.Timeouts.Heartbeat.D()
		}
		layers = append(layers, m.Retry)
	}
	if s.Timeout > 0 {
		st.Timeout = s.Timeout.D()
	}
	if s.Heartbeat > 0 {
		st.Heartbeat = s.Heartbeat.D()
	}
	if s.Retry != nil {
		layers = append(layers, *s.Retry)
	}
	for _, r := range layers {
		if r.MaxAttempts > 0 {
			st.MaxAttempts = r.MaxAttempts
		}
		if r.InitialInterval > 0 {
			st.InitialInterval = r.InitialInterval.D()
		}
		if r.Backoff > 0 {
			st.Backoff = r.Backoff
		}
		if r.MaxInterval > 0 {
			st.MaxInterval = r.MaxInterval.D()
		}
	}
	if s.OnFailure == plan.OnFailureFail || s.OnFailure == plan.OnFailureSkip {
		st.MaxAttempts = 1
	}
	if st.Heartbeat == 0 && m != nil && m.Entrypoint.Type == manifest.EntryCommand && st.Timeout > time.Minute {
		st.Heartbeat = CommandHeartbeat
	}
	return st
}
