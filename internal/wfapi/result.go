package wfapi

import (
	"github.com/capflow/capflow/wire"
)

// The run's result and its parts: the client's types.

// Artifact is a file a step's output names (the client's type).
type Artifact = wire.Artifact

// StepResult is one step in the workflow result and the progress query:
// the client's type, the one definition.
type StepResult = wire.StepResult

// MaxItemResults bounds the items listed per step in the result.
const MaxItemResults = 200

// ReportPaths are a run's report files (the client's type).
type ReportPaths = wire.ReportPaths

// Finalized is the Finalize activity's answer: the report's files, and
// what the run's result takes from it.
type Finalized struct {
	ReportPaths
	// Outputs: the plan's outputs, evaluated where stored data can be read.
	Outputs map[string]any `json:"outputs,omitempty"`
	// Steps (a run that continued as new): every step as the report has
	// it, trimmed to fit the result.
	Steps *StepsAnswer `json:"steps,omitempty"`
	// TraceID: the run's trace, when traced.
	TraceID string `json:"trace_id,omitempty"`
	// Next: what to do next about the run (whatnext.Of over every step),
	// the first MaxNext.
	Next []wire.Next `json:"next,omitempty"`
}

// MaxNext bounds the what-next lines a run's result carries (each holds
// up to whatnext.StderrLines lines of a step's stderr).
const MaxNext = 20

// StepsAnswer is the steps part of a trimmed result.
type StepsAnswer struct {
	Steps   []StepResult      `json:"steps"`
	Counts  map[StepState]int `json:"counts,omitempty"`
	Omitted int               `json:"omitted,omitempty"`
}

// Result is the PlanWorkflow's result: the client's type, the one
// definition; the worker converts its domain values to it where they
// cross (the Resolve activity's answer, a step's envelope: Wire).
type Result = wire.Result
