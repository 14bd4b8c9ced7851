package wfapi

// Metrics capflow records through the SDK's metrics handler (the workflow's
// is replay-safe), served by a worker started with --metrics-addr
// (docs/operations.md). Tags: status and capability for steps, status for
// runs, reason for gaps.
const (
	MetricStepsEnded   = "capflow_steps_ended"
	MetricStepDuration = "capflow_step_duration"
	MetricRunsEnded    = "capflow_runs_ended"
	MetricGaps         = "capflow_gaps"
)
