package wire

import (
	"regexp"
	"strings"
)

// Result is a run's result and, mid-run, its progress.
type Result struct {
	Status     RunStatus    `json:"status"`
	Plan       string       `json:"plan"`
	Message    string       `json:"message"`
	WorkflowID string       `json:"workflow_id"`
	RunID      string       `json:"run_id"`
	Steps      []StepResult `json:"steps"`
	// StepCounts and StepsOmitted are set when the result was trimmed to
	// stay small: Steps then lists only steps that did not succeed, and the
	// report has every step.
	StepCounts   map[StepState]int `json:"step_counts,omitempty"`
	StepsOmitted int               `json:"steps_omitted,omitempty"`
	// Segments counts the times the run continued as new.
	Segments   int           `json:"segments,omitempty"`
	Gaps       []Gap         `json:"gaps"`
	Resolution []Resolution  `json:"resolution"`
	Policy     *PolicyReport `json:"policy,omitempty"`
	Problems   []Problem     `json:"problems,omitempty"`
	// Omitted: a plan with more than 100 gaps, problems or policy
	// violations lists the first ones; the report has them all.
	Omitted *Omitted    `json:"omitted,omitempty"`
	Route   *RouteInfo  `json:"route,omitempty"`
	Report  ReportPaths `json:"report"`
	// Outputs are the plan's outputs, evaluated when the run ended.
	Outputs map[string]any `json:"outputs,omitempty"`
	// Warnings are failures the run absorbed by their severity
	// (failure_policy: by_severity), most severe first, processes left
	// on a lost host, and stored outputs found missing or altered with
	// what the run did about each.
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
	// Next is what to do about a run that did not pass: a line a step
	// that failed or waits after a failure (docs/errors.md). Clients add
	// it to the result they show; the workflow leaves it empty.
	Next []Next `json:"next,omitempty"`
	// Busy: the run's workflow task was busy (a local step ran), so this
	// progress is what the server knows, its running activities only
	// (Run.ProgressNow).
	Busy bool `json:"busy,omitempty"`
}

// Next is what a person can do about one failure: the step, its code and
// severity, its stderr's last lines, the command that continues the run
// and advice from the code.
type Next struct {
	Step     string    `json:"step,omitempty"`
	Code     ErrorCode `json:"code,omitempty"`
	Severity Severity  `json:"severity,omitempty"`
	Stderr   []string  `json:"stderr_tail,omitempty"`
	Command  string    `json:"command,omitempty"`
	Advice   string    `json:"advice,omitempty"`
}

// Artifact is a file a step's output names (a field its tool's output
// schema marks `format: path` or `x-capflow-artifact: true`), stored in
// the artifact store by digest.
type Artifact struct {
	// Pointer is the field in the step's data (a JSON pointer).
	Pointer string `json:"pointer"`
	Path    string `json:"path"`
	SHA256  string `json:"sha256"`
	Bytes   int64  `json:"bytes"`
}

// StepResult is one step of a Result.
type StepResult struct {
	ID         string    `json:"id"`
	Capability string    `json:"capability"`
	Status     StepState `json:"status"`
	Tool       string    `json:"tool,omitempty"`
	Version    string    `json:"version,omitempty"`
	Attempts   int       `json:"attempts"`
	Reason     string    `json:"reason,omitempty"`
	Critical   bool      `json:"critical,omitempty"`
	StartedAt  string    `json:"started_at,omitempty"`
	EndedAt    string    `json:"ended_at,omitempty"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	DataFile   string    `json:"data_file,omitempty"`
	DataSHA256 string    `json:"data_sha256,omitempty"`
	Envelope   *Envelope `json:"envelope,omitempty"`
	// EnvelopeFile: where the step's whole envelope is stored: the run's
	// journal (envelopes.jsonl, a JSON line {step, envelope} a step; the
	// step's last line is its envelope), or for a cut or failed envelope
	// <run>/steps/<id>.envelope.json.
	EnvelopeFile string `json:"envelope_file,omitempty"`
	// JoinNote says how an any/quorum join was met ("quorum: 3/4 (75%)
	// met, continuing").
	JoinNote string `json:"join_note,omitempty"`
	// Execution is the path that ran the step: "activity", "local" (a
	// local activity), "local, then activity" or "inline" (workflows'
	// Path constants).
	Execution string `json:"execution,omitempty"`
	// InputsSHA256 is the digest of the step's evaluated inputs;
	// ReusedFrom names the run whose output it reused (no tool ran).
	InputsSHA256 string `json:"inputs_sha256,omitempty"`
	ReusedFrom   string `json:"reused_from,omitempty"`
	// CacheKey is the step's key in the result cache (docs/cache.md);
	// CachedFrom names the run whose cached result it reused (no tool
	// ran).
	CacheKey   string `json:"cache_key,omitempty"`
	CachedFrom string `json:"cached_from,omitempty"`
	// Artifacts are the files its output names, stored by digest.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// For a for_each step: its items' counts, and each item (up to 200;
	// the report has them all).
	ItemCounts *ItemCounts  `json:"item_counts,omitempty"`
	Items      []ItemResult `json:"items,omitempty"`
	// Child is a sub-plan step's run.
	Child *ChildRun `json:"child,omitempty"`
	// Agent is an agent step's rounds (docs/agents.md).
	Agent *AgentRun `json:"agent,omitempty"`
	// Waiting says what a waiting step waits for; Decisions are the
	// operators' answers so far.
	Waiting   *Wait      `json:"waiting,omitempty"`
	Decisions []Decision `json:"decisions,omitempty"`
	// Latest is what a running step says now, from its heartbeats: its
	// latest feedback ("waiting for a slot (tool x: concurrency 2)").
	Latest *Feedback `json:"latest,omitempty"`
}

// Live sets each running step's Latest from what Temporal says of its
// activity, and its attempts from the attempt the server runs (a step's
// count is kept when an attempt ends: while its first runs it says 0).
func (r *Result) Live(info *RunInfo) {
	now, attempt := map[string]*Feedback{}, map[string]int{}
	for _, pa := range info.Pending {
		id, ok := StepOfActivity(pa.ActivityID)
		if !ok {
			continue
		}
		if pa.Heartbeat != nil && pa.Heartbeat.Latest != nil {
			now[id] = pa.Heartbeat.Latest
		}
		if label, _ := LabelOfActivity(pa.ActivityID); label == id { // not an item's
			attempt[id] = int(pa.Attempt)
		}
	}
	for i := range r.Steps {
		if r.Steps[i].Status != StepRunning {
			continue
		}
		if f := now[r.Steps[i].ID]; f != nil {
			r.Steps[i].Latest = f
		}
		r.Steps[i].Attempts = max(r.Steps[i].Attempts, attempt[r.Steps[i].ID])
	}
}

// attemptSuffix is what an attempt's path adds to a step's or an item's
// activity ID: after a local or an eager attempt, an operator's retry, a
// rerun, a host move, each of those.
var attemptSuffix = regexp.MustCompile(`(-after-local|` + regexp.QuoteMeta(OnHostSuffix) + `|-retry-\d+|-rerun-\d+|-host-\d+)+$`)

// ReservedEnding is the ending of a step ID that capflow adds to a
// step's own activity IDs ("-retry-2"), or "": a step so named could take
// another step's activity ID, which Temporal refuses while both run, and
// would read as that step in status and the console.
func ReservedEnding(stepID string) string {
	return attemptSuffix.FindString(stepID)
}

// OnHostSuffix ends the activity ID of a step's attempts on the run's host
// after an eager first attempt ('@' is in no step ID).
const OnHostSuffix = "@host"

// itemIndex ends an item's label ("x[3]").
var itemIndex = regexp.MustCompile(`\[\d+\]$`)

// LabelOfActivity is the step or the item ("x[3]") an activity ID runs
// ("step-<label>..."), or false for capflow's own activities.
func LabelOfActivity(activityID string) (string, bool) {
	id, ok := strings.CutPrefix(activityID, "step-")
	return attemptSuffix.ReplaceAllString(id, ""), ok
}

// StepOfActivity is the step an activity ID runs (for an item, its
// for_each step), or false for capflow's own activities.
func StepOfActivity(activityID string) (string, bool) {
	label, ok := LabelOfActivity(activityID)
	return itemIndex.ReplaceAllString(label, ""), ok
}

// ItemCounts counts a for_each step's items.
type ItemCounts struct {
	Count     int `json:"count"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	Running   int `json:"running"`
}

// ItemResult is one item of a for_each step.
type ItemResult struct {
	Index    int       `json:"index"`
	Status   StepState `json:"status"`
	Attempts int       `json:"attempts,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// ChildRun is a sub-plan step's run.
type ChildRun struct {
	WorkflowID string      `json:"workflow_id"`
	RunID      string      `json:"run_id,omitempty"`
	Status     RunStatus   `json:"status,omitempty"`
	Report     ReportPaths `json:"report"`
}

// ReportPaths are a run's report files.
type ReportPaths struct {
	JSON     string `json:"json"`
	Markdown string `json:"markdown"`
}

// RouteInfo says which route turned request text into the plan.
type RouteInfo struct {
	Kind string `json:"kind"` // "rule" or "llm"
	ID   string `json:"id"`
}

// Omitted counts what a result left out of its lists, and names the file
// in the run folder that has them all.
type Omitted struct {
	Gaps       int    `json:"gaps,omitempty"`
	Problems   int    `json:"problems,omitempty"`
	Violations int    `json:"violations,omitempty"`
	File       string `json:"file"`
}

// Resolution is the tool chosen for a step.
type Resolution struct {
	StepID     string `json:"step_id"`
	Capability string `json:"capability"`
	Tool       string `json:"tool"`
	Version    string `json:"version"`
	Digest     string `json:"digest"`
	Source     string `json:"source"`
	Reason     string `json:"reason,omitempty"`
}

// PolicyReport is what the project's policy said of the plan.
type PolicyReport struct {
	Source      string         `json:"source,omitempty"`
	Allowed     bool           `json:"allowed"`
	Violations  []Violation    `json:"violations"`
	Limits      map[string]int `json:"limits"`
	MaxParallel int            `json:"max_parallel"`
	Notes       []string       `json:"notes,omitempty"`
	// Sandbox is the project's confinement of command tools (required,
	// off; absent: default).
	Sandbox string `json:"sandbox,omitempty"`
}

// Violation is one rule of the policy a plan breaks.
type Violation struct {
	Rule    string `json:"rule"`
	StepID  string `json:"step_id,omitempty"`
	Message string `json:"message"`
}

// Problem is one problem of a plan or an input, where it is.
type Problem struct {
	File    string    `json:"file,omitempty"`
	Line    int       `json:"line,omitempty"`
	Column  int       `json:"column,omitempty"`
	Field   string    `json:"field,omitempty"`
	Message string    `json:"message"`
	Code    ErrorCode `json:"code"`
}

// ErrorCode is a contract error code (docs/errors.md), such as
// TOOL_FAILURE (caperr.Code is this type).
type ErrorCode string

// Severity is an error's severity (caperr.Severity is this type):
// CRITICAL, HIGH, MEDIUM or LOW.
type Severity string

// Severities lists them most severe first.
var Severities = []Severity{"CRITICAL", "HIGH", "MEDIUM", "LOW"}

// Rank orders severities, most severe first (0); an unknown one last.
func (s Severity) Rank() int {
	for i, x := range Severities {
		if x == s {
			return i
		}
	}
	return len(Severities)
}

// Envelope is the result of one tool run (docs/envelope.md).
type Envelope struct {
	ToolID     string     `json:"toolId"`
	ExitCode   int        `json:"exitCode"`
	Success    bool       `json:"success"`
	Timestamp  string     `json:"timestamp"`
	Message    string     `json:"message"`
	Feedback   []Feedback `json:"feedback"`
	Data       any        `json:"data,omitempty"`
	DurationMS int64      `json:"duration_ms"`
	Error      *ErrorInfo `json:"error,omitempty"`
}

// Feedback is one event of a tool run.
type Feedback struct {
	Phase      string `json:"phase"`
	Level      string `json:"level"`
	Message    string `json:"message"`
	Timestamp  string `json:"timestamp"`
	Detail     string `json:"detail,omitempty"`
	DurationMS *int64 `json:"duration_ms,omitempty"`
}

// ErrorInfo is a failed envelope's error.
type ErrorInfo struct {
	Code      ErrorCode `json:"code"`
	Severity  Severity  `json:"severity"`
	Retryable bool      `json:"retryable"`
	// Cause is the code behind a summarising one: the last attempt's code
	// of a step that ended RETRY_EXHAUSTED.
	Cause ErrorCode `json:"cause,omitempty"`
}
