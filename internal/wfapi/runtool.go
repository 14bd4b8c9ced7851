package wfapi

import (
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/wire"
)

// The RunTool activity's input and result.

// RunToolInput is the RunTool activity's input. References in Step.With
// are evaluated inside the activity, so large outputs can travel as files.
// Inputs and Deps hold only what the step references.
type RunToolInput struct {
	WorkflowID string                 `json:"workflow_id"`
	RunDir     string                 `json:"run_dir"`
	Step       StepCall               `json:"step"`
	Inputs     map[string]any         `json:"inputs,omitempty"`
	Deps       map[string]StepOutcome `json:"deps,omitempty"`
	// Host is the run's host queue when the step runs as a local activity
	// or an eager one (on the workflow's queue): a worker on another host
	// answers ErrWrongHost instead of running it.
	Host string `json:"host,omitempty"`
	// AttemptsBefore: attempts the step made as a local activity (or an
	// eager one) before this regular activity (its attempt numbers
	// continue from there).
	AttemptsBefore int32 `json:"attempts_before,omitempty"`
	// MaxAttempts is the step's attempts in all when this activity may
	// make fewer (an eager first attempt; 0: its retry policy's).
	MaxAttempts int32 `json:"max_attempts,omitempty"`
	// Lineage is the first run ID of the run's chain (its root's, for a
	// sub-plan or a batch): kept across continue-as-new and reset, new for
	// `run --id --rerun`. With Retry (the operator retries the step had),
	// it lets a non-idempotent step that another run of the same chain
	// started refuse to start again (docs/workflow.md).
	Lineage string `json:"lineage,omitempty"`
	Retry   int    `json:"retry,omitempty"`
	// Spilled: the input would have passed MaxInputBytes, so its with,
	// inputs, dependencies and item value are in this blob of the run
	// folder (their fields here are empty); RunTool checks its digest.
	Spilled *Blob `json:"spilled,omitempty"`
}

// MaxInputBytes bounds a RunTool input in history: past it, what the step
// reads travels by reference (RunToolInput.Spilled, docs/limits.md).
const MaxInputBytes = 256 << 10

// Spill is what a spilled RunTool input stores in its blob.
type Spill struct {
	With   map[string]any         `json:"with,omitempty"`
	Inputs map[string]any         `json:"inputs,omitempty"`
	Deps   map[string]StepOutcome `json:"deps,omitempty"`
	// Value and ForEach: an item's value, or its list's source.
	Value   any `json:"value,omitempty"`
	ForEach any `json:"for_each,omitempty"`
}

// ErrWrongHost is the error type of a local (or eager) activity that ran
// on a worker that is not the run's host; the workflow runs it as a
// regular activity on the host instead.
const ErrWrongHost = "CAPFLOW_WRONG_HOST"

// RunToolResult is the RunTool activity's result (also the details of
// its failures).
type RunToolResult struct {
	Envelope envelope.Envelope `json:"envelope"`
	// EnvelopeFile is where the envelope is also stored (the report
	// reads it there when the result left it out).
	EnvelopeFile string `json:"envelope_file,omitempty"`
	DataFile     string `json:"data_file,omitempty"`
	DataSHA256   string `json:"data_sha256,omitempty"`
	Attempt      int32  `json:"attempt"`
	// InputsSHA256 is the digest of the step's evaluated inputs (a rerun
	// reuses a step only when they are unchanged); ReusedFrom is set when
	// the step ran no tool and carried that run's output over.
	InputsSHA256 string `json:"inputs_sha256,omitempty"`
	ReusedFrom   string `json:"reused_from,omitempty"`
	// CacheKey, CachedFrom and Artifacts: see StepResult.
	CacheKey   string     `json:"cache_key,omitempty"`
	CachedFrom string     `json:"cached_from,omitempty"`
	Artifacts  []Artifact `json:"artifacts,omitempty"`
	// LostData names the steps whose stored output this step found
	// missing or altered (it failed with OBSERVABILITY_ERROR); the workflow
	// re-runs those producers when they are idempotent.
	LostData []string `json:"lost_data,omitempty"`
}

// Heartbeat is the detail of RunTool's heartbeats (the client's type).
type Heartbeat = wire.Heartbeat

// HeartbeatLines bounds the stderr lines a heartbeat carries.
const HeartbeatLines = 20

// Succeeded is what a step reads of a dependency that succeeded: its
// status and, withData, its data (or where it is stored) and the files it
// names.
func Succeeded(data any, dataFile, dataSHA256 string, artifacts []Artifact, withData bool) StepOutcome {
	o := StepOutcome{Success: true, Status: StepSucceeded}
	if withData {
		o.DataFile, o.DataSHA256, o.Artifacts = dataFile, dataSHA256, artifacts
		if dataFile == "" {
			o.Data = data
		}
	}
	return o
}
