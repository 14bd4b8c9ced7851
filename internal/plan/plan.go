// Package plan parses and validates capability plans (docs/plans.md):
// steps, references between them, joins and failure policies. It has
// no Temporal import: the CLI and the workflow's activities share it.
package plan

import (
	"sort"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/yamldoc"
)

// Failure policies.
const (
	FailFast     = "fail_fast"
	ContinueAll  = "continue_all"
	CriticalPath = "critical_path"
	// BySeverity: CRITICAL errors stop the run, HIGH ones wait for an
	// operator's decision, MEDIUM and LOW are absorbed as warnings.
	BySeverity = "by_severity"
)

// Join policies.
const (
	JoinAll    = "all"
	JoinAny    = "any"
	JoinQuorum = "quorum"
)

// on_failure values.
const (
	OnFailureRetry = "retry"
	OnFailureSkip  = "skip"
	OnFailureFail  = "fail"
	// OnFailureAsk: once retries ran out, the step waits for an operator
	// to retry, skip or fail it.
	OnFailureAsk = "ask"
)

// DefaultAskTimeout is how long a step waits for a decision unless the
// plan's ask_timeout says otherwise.
const DefaultAskTimeout = 24 * time.Hour

// Plan is a validated plan.
type Plan struct {
	Name          string                    `json:"name"`
	Version       int                       `json:"version,omitempty"`
	Description   string                    `json:"description,omitempty"`
	Inputs        map[string]map[string]any `json:"inputs,omitempty"`
	Defaults      Defaults                  `json:"defaults"`
	FailurePolicy string                    `json:"failure_policy"`
	MaxParallel   int                       `json:"max_parallel,omitempty"`
	// AskTimeout bounds every wait for a decision (DefaultAskTimeout).
	AskTimeout manifest.Duration `json:"ask_timeout,omitempty"`
	Policy     *PolicySpec       `json:"policy,omitempty"`
	Steps      []*Step           `json:"steps"`
	// Outputs are what the run returns: name -> reference template.
	Outputs map[string]string `json:"outputs,omitempty"`

	// File is where the plan came from, for messages.
	File string `json:"-"`
	// root is the parsed file, for positions (nil: a plan built in code).
	root *yamldoc.Node

	byID map[string]*Step
}

// Defaults apply to every step that does not set its own.
type Defaults struct {
	Timeout   manifest.Duration `json:"timeout,omitempty"`
	Heartbeat manifest.Duration `json:"heartbeat,omitempty"`
	Retry     manifest.Retry    `json:"retry,omitempty"`
}

// PolicySpec is a plan's own narrowing of the project policy.
type PolicySpec struct {
	Allow  []string       `json:"allow,omitempty"`
	Deny   []string       `json:"deny,omitempty"`
	Limits map[string]int `json:"limits,omitempty"`
}

// Step is one node of the DAG.
type Step struct {
	ID                 string            `json:"id"`
	Capability         string            `json:"capability"`
	Tool               string            `json:"tool,omitempty"`
	Description        string            `json:"description,omitempty"`
	With               map[string]any    `json:"with,omitempty"`
	Needs              []string          `json:"needs,omitempty"`
	OnFailure          string            `json:"on_failure,omitempty"`
	Critical           bool              `json:"critical,omitempty"`
	Join               Join              `json:"join"`
	Timeout            manifest.Duration `json:"timeout,omitempty"`
	Heartbeat          manifest.Duration `json:"heartbeat,omitempty"`
	Retry              *manifest.Retry   `json:"retry,omitempty"`
	CapabilityContract *Contract         `json:"capability_contract,omitempty"`
	CoverageConfidence *float64          `json:"coverage_confidence,omitempty"`
	CoverageRationale  string            `json:"coverage_rationale,omitempty"`

	// ForEach runs the step once per item: a reference to a list (a
	// string) or a literal list.
	ForEach any `json:"for_each,omitempty"`
	// As names the item in references and expressions (default "item").
	As string `json:"as,omitempty"`
	// MaxParallel bounds the items running at once (default: the plan's).
	MaxParallel int `json:"max_parallel,omitempty"`
	// Tolerate is how many items may fail with the step still succeeding.
	Tolerate *Tolerate `json:"tolerate,omitempty"`
	// When is a CEL condition; false skips the step (never a failure).
	When string `json:"when,omitempty"`
	// Cache: reuse an earlier run's result of the same tool and inputs
	// (nil: the tool's setting; docs/cache.md).
	Cache *manifest.Cache `json:"cache,omitempty"`
	// Plan is a sub-plan (a path from the project root) run as a child
	// workflow instead of a tool; With holds its inputs.
	Plan string `json:"plan,omitempty"`
	// Sub is the loaded sub-plan and SubValue its document (LoadSubPlans).
	Sub      *Plan `json:"-"`
	SubValue any   `json:"-"`
	// Agent hands the step to a language model whose proposals capflow
	// checks as plans (docs/agents.md); OutputSchema checks its finish.
	Agent        *Agent         `json:"agent,omitempty"`
	OutputSchema map[string]any `json:"output_schema,omitempty"`

	// Deps is Needs plus the steps referenced in With, sorted.
	Deps []string `json:"deps,omitempty"`
	// Line is where the step starts in its file (0 when unknown).
	Line int `json:"-"`
	// WhenPos is where the step's `when` is (0 when unknown), for problems
	// found when conditions are type-checked.
	WhenLine, WhenColumn int `json:"-"`
}

// Join says how a step's dependencies must end for it to run.
type Join struct {
	Policy    string  `json:"policy"`
	Min       int     `json:"min,omitempty"`
	Threshold float64 `json:"threshold,omitempty"`
}

// Tolerate bounds the failed items of a for_each step.
type Tolerate struct {
	Failures int     `json:"failures,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
}

// Allowed is how many of n items may fail.
func (t *Tolerate) Allowed(n int) int {
	if t == nil {
		return 0
	}
	if t.Ratio > 0 {
		return int(t.Ratio * float64(n))
	}
	return t.Failures
}

// ItemName is the name of a for_each step's item in references.
func (s *Step) ItemName() string {
	if s.As != "" {
		return s.As
	}
	return DefaultItemName
}

// DefaultItemName is the item's name when a for_each step sets no `as`.
const DefaultItemName = "item"

// IsForEach reports whether the step runs once per item.
func (s *Step) IsForEach() bool { return s.ForEach != nil }

// Contract is the capability contract a step expects of its tool.
type Contract struct {
	InputSchema  map[string]any `json:"input_schema,omitempty"`
	OutputSchema map[string]any `json:"output_schema,omitempty"`
}

// Required returns how many dependencies must succeed for the join.
func (s *Step) Required() int {
	n := len(s.Deps)
	switch s.Join.Policy {
	case JoinAny:
		if n == 0 {
			return 0
		}
		return 1
	case JoinQuorum:
		if s.Join.Min > 0 {
			return s.Join.Min
		}
		r := int(s.Join.Threshold*float64(n) + 0.999999)
		if r < 1 && n > 0 {
			r = 1
		}
		return r
	}
	return n
}

// Step returns the step with id, or nil.
func (p *Plan) Step(id string) *Step {
	if p.byID == nil || len(p.byID) != len(p.Steps) {
		p.byID = make(map[string]*Step, len(p.Steps))
		for _, s := range p.Steps {
			if _, dup := p.byID[s.ID]; !dup {
				p.byID[s.ID] = s
			}
		}
	}
	return p.byID[id]
}

// Dependents maps each step id to the steps that depend on it, sorted.
func (p *Plan) Dependents() map[string][]string {
	out := map[string][]string{}
	for _, s := range p.Steps {
		for _, d := range s.Deps {
			out[d] = append(out[d], s.ID)
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

// InputNames lists the plan's inputs, sorted.
func (p *Plan) InputNames() []string {
	var out []string
	for k := range p.Inputs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Order returns the steps in a deterministic topological order (ready
// steps by id). The plan must be acyclic (Parse guarantees it).
func (p *Plan) Order() []*Step {
	indeg := map[string]int{}
	for _, s := range p.Steps {
		indeg[s.ID] = len(s.Deps)
	}
	deps := p.Dependents()
	var ready []string
	for _, s := range p.Steps {
		if indeg[s.ID] == 0 {
			ready = append(ready, s.ID)
		}
	}
	sort.Strings(ready)
	var out []*Step
	for len(ready) > 0 {
		id := ready[0]
		ready = ready[1:]
		out = append(out, p.Step(id))
		var next []string
		for _, d := range deps[id] {
			indeg[d]--
			if indeg[d] == 0 {
				next = append(next, d)
			}
		}
		ready = append(ready, next...)
		sort.Strings(ready)
	}
	return out
}

// Place positions e at a field of the plan, by its path: the file, where
// the field is, and the field's name (steps[2].with.query).
func (p *Plan) Place(e *caperr.Error, path ...string) *caperr.Error {
	line, col := p.Pos(path...)
	return e.At(p.File, line, col, yamldoc.FieldPath(path))
}

// Pos is where a field of the plan is in its file, by its path (steps, 2,
// with, max_bytes); the nearest enclosing field's when the path goes
// further than the file; 0, 0 for a plan built in code.
func (p *Plan) Pos(path ...string) (line, col int) {
	if p.root == nil {
		return 0, 0
	}
	pos := p.root.PosOf(path)
	return pos.Line, pos.Column
}
