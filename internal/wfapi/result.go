package wfapi

import (
	"maps"
	"slices"

	"github.com/capflow/capflow/client"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/verdict"
)

// The run's result and its parts (the workflow returns them mapped to
// client.Result: the same JSON).

// Artifact is a file a step's output names (the client's type).
type Artifact = client.Artifact

// StepResult is one step in the workflow result and the progress query.
type StepResult struct {
	ID         string             `json:"id"`
	Capability string             `json:"capability"`
	Status     StepState          `json:"status"`
	Tool       string             `json:"tool,omitempty"`
	Version    string             `json:"version,omitempty"`
	Attempts   int                `json:"attempts"`
	Reason     string             `json:"reason,omitempty"`
	Critical   bool               `json:"critical,omitempty"`
	StartedAt  string             `json:"started_at,omitempty"`
	EndedAt    string             `json:"ended_at,omitempty"`
	DurationMS int64              `json:"duration_ms,omitempty"`
	DataFile   string             `json:"data_file,omitempty"`
	DataSHA256 string             `json:"data_sha256,omitempty"`
	Envelope   *envelope.Envelope `json:"envelope,omitempty"`
	// EnvelopeFile: where the step's whole envelope is stored: the run's
	// journal (envelopes.jsonl, a JSON line {step, envelope} a step; the
	// step's last line is its envelope), or for a cut or failed envelope
	// <run>/steps/<id>.envelope.json.
	EnvelopeFile string `json:"envelope_file,omitempty"`
	// JoinNote says how an any/quorum join was met ("quorum: 3/4 (75%)
	// met, continuing").
	JoinNote string `json:"join_note,omitempty"`
	// Execution is the path that ran the step: "local" (a local
	// activity), "activity", or "local, then activity".
	Execution string `json:"execution,omitempty"`
	// InputsSHA256 and ReusedFrom: see RunToolResult.
	InputsSHA256 string `json:"inputs_sha256,omitempty"`
	ReusedFrom   string `json:"reused_from,omitempty"`
	// CacheKey is the step's key in the result cache (docs/cache.md);
	// CachedFrom names the run whose cached result it reused (no tool
	// ran).
	CacheKey   string `json:"cache_key,omitempty"`
	CachedFrom string `json:"cached_from,omitempty"`
	// Artifacts are the files its output names, stored by digest.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// For a for_each step: its items' counts, and each item (up to
	// MaxItemResults; the report has them all).
	ItemCounts *ItemCounts  `json:"item_counts,omitempty"`
	Items      []ItemResult `json:"items,omitempty"`
	// Child is a sub-plan step's run.
	Child *ChildRun `json:"child,omitempty"`
	// Waiting says what a waiting step waits for; Decisions are the
	// operators' answers so far (docs/run-control.md).
	Waiting   *Wait      `json:"waiting,omitempty"`
	Decisions []Decision `json:"decisions,omitempty"`
}

// MaxItemResults bounds the items listed per step in the result.
const MaxItemResults = 200

// ReportPaths are the files Finalize writes.
type ReportPaths struct {
	JSON     string `json:"json"`
	Markdown string `json:"markdown"`
	// Outputs (Finalize's answer only): the plan's outputs, evaluated
	// where stored data can be read.
	Outputs map[string]any `json:"outputs,omitempty"`
	// Steps (Finalize's answer for a run that continued as new): every
	// step as the report has it, trimmed to fit the result.
	Steps *StepsAnswer `json:"steps,omitempty"`
	// TraceID (Finalize's answer only): the run's trace, when traced.
	TraceID string `json:"trace_id,omitempty"`
}

// StepsAnswer is the steps part of a trimmed result.
type StepsAnswer struct {
	Steps   []StepResult      `json:"steps"`
	Counts  map[StepState]int `json:"counts,omitempty"`
	Omitted int               `json:"omitted,omitempty"`
}

// Result is the PlanWorkflow's result.
type Result struct {
	Status     RunStatus    `json:"status"`
	Plan       string       `json:"plan"`
	Message    string       `json:"message"`
	WorkflowID string       `json:"workflow_id"`
	RunID      string       `json:"run_id"`
	Steps      []StepResult `json:"steps"`
	// StepCounts and StepsOmitted are set when the result was trimmed to
	// stay small (Trim): Steps then lists only steps that did not succeed,
	// and the report has every step.
	StepCounts   map[StepState]int `json:"step_counts,omitempty"`
	StepsOmitted int               `json:"steps_omitted,omitempty"`
	// Segments counts the times the run continued as new.
	Segments   int                  `json:"segments,omitempty"`
	Gaps       []gap.Gap            `json:"gaps"`
	Resolution []gap.StepResolution `json:"resolution"`
	Policy     *policy.Report       `json:"policy,omitempty"`
	Problems   []verdict.Problem    `json:"problems,omitempty"`
	// Omitted: a plan with more than MaxListed gaps, problems or policy
	// violations lists the first ones here; the report has them all.
	Omitted *Omitted    `json:"omitted,omitempty"`
	Route   *RouteInfo  `json:"route,omitempty"`
	Report  ReportPaths `json:"report"`
	// Outputs are the plan's outputs, evaluated when the run ended.
	Outputs map[string]any `json:"outputs,omitempty"`
	// Warnings are failures the run absorbed by their severity
	// (failure_policy: by_severity), most severe first, and processes left
	// on a lost host.
	Warnings []string `json:"warnings,omitempty"`
	// LostHosts are the host queues the run lost and moved away from.
	LostHosts  []string `json:"lost_hosts,omitempty"`
	StartedAt  string   `json:"started_at"`
	EndedAt    string   `json:"ended_at,omitempty"`
	DurationMS int64    `json:"duration_ms"`
	// URL is the run in the Temporal Web UI: the CLI adds it to the result
	// it prints (the workflow leaves it empty).
	URL string `json:"url,omitempty"`
	// TraceID is the run's OpenTelemetry trace, when its worker traces
	// (telemetry.otlp_endpoint, docs/observability.md).
	TraceID string `json:"trace_id,omitempty"`
}

// OutputNames lists the result's outputs, sorted.
func (r *Result) OutputNames() []string { return slices.Sorted(maps.Keys(r.Outputs)) }
