package wfapi

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/capflow/capflow/defaults"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
)

// Large plans (docs/limits.md): the resolved steps are stored in the run
// folder and loaded page by page; a run whose history grows long drains
// its running steps and continues as new, carrying only what the rest of
// the run needs. The types here cross that boundary.

// Activity names of large-plan runs.
const (
	LoadStepsActivity  = "LoadSteps"
	CheckpointActivity = "Checkpoint"
)

// Defaults of large-plan runs (recorded in history through ResolveResult,
// so a worker's setting never changes how a recorded run replays).
const (
	// DefaultSegmentEvents is the history length at which a run stops
	// starting steps, lets the running ones end and continues as new. Half
	// of Temporal's 10,240-event warning leaves room for the drain.
	DefaultSegmentEvents = defaults.SegmentEvents
	// DefaultSegmentBytes is the history size at which a run continues as
	// new whatever its length: local activities' markers make events of a
	// few KB, and Temporal warns at 10 MB of history.
	DefaultSegmentBytes = 4 << 20
	// DefaultItemBatch is how many items of a for_each step one workflow
	// runs: past it, batches run as child ItemsWorkflows (an item costs ~3
	// events).
	DefaultItemBatch = 500
	// DefaultLocalFlush is how many local steps may end in one workflow
	// task before the run yields so their markers are recorded.
	DefaultLocalFlush = 100
	// DefaultInlineFlushBytes is how many bytes of inline results (their
	// markers) one workflow task may record before the run yields: inline
	// steps cost microseconds, so a byte budget, not LocalFlush's count,
	// keeps a task's completion far under the server's 4 MB message
	// limit (a marker is at least ~300 bytes: at most ~1,700 a task).
	DefaultInlineFlushBytes = 512 << 10
	// DefaultLocalAttempts is how many attempts a local step makes as a
	// local activity before the rest run as a regular activity.
	DefaultLocalAttempts = 2
	// InlineStepsBytes: resolved steps up to this size travel in the
	// Resolve result; larger ones are loaded in pages of PageBytes.
	InlineStepsBytes = 256 << 10
	// (A page is an activity's result: past 512 KB the SDK warns, and the
	// payload discipline is broken; 1 MB pages were.)
	PageBytes = 256 << 10
	// MaxResultBytes bounds the workflow result and the progress query;
	// beyond it the per-step detail lives in the report only.
	MaxResultBytes = 400 << 10
)

// StepsRef is where the resolved steps are stored: a file in the run
// folder, checked by digest, and the pages (ranges of steps, each at most
// PageBytes of JSON) to load it in.
type StepsRef struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	Count  int    `json:"count"`
	Pages  []Page `json:"pages"`
}

// Page is a range of steps [From, To) in plan order.
type Page struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// LoadStepsInput asks for one page of the stored resolved steps.
type LoadStepsInput struct {
	Ref  StepsRef `json:"ref"`
	Page Page     `json:"page"`
}

// Resume is what a run carries into its next segment when it continues
// as new. Clients never set it.
type Resume struct {
	Segment    int    `json:"segment"`
	FirstRunID string `json:"first_run_id"`
	StartedAt  string `json:"started_at"`
	// Resolved is the resolution without its steps (they are reloaded
	// from Resolved.StepsRef) and without the per-step resolution.
	Resolved ResolveResult `json:"resolved"`
	// States holds one letter per step, in plan order (StateLetter).
	States string `json:"states"`
	// Outcomes of ended steps that pending steps or the plan's outputs
	// still read; Reasons of the ended steps that did not succeed.
	Outcomes map[string]StepOutcome `json:"outcomes,omitempty"`
	Reasons  map[string]string      `json:"reasons,omitempty"`
	// Deadline is when max_run_seconds runs out (empty: no limit).
	Deadline string `json:"deadline,omitempty"`
	// Reuse is the rerun link, kept across segments.
	Reuse *Reuse `json:"reuse,omitempty"`
	// Codes are the error codes of failed steps (by_severity judges them);
	// Decided the steps an operator skipped (their failure is absorbed).
	Codes   map[string]caperr.Code `json:"codes,omitempty"`
	Decided []string               `json:"decided,omitempty"`
	// LostHosts and LostProcesses: hosts the run left, and the warnings
	// about servers it left on them.
	LostHosts     []string `json:"lost_hosts,omitempty"`
	LostProcesses []string `json:"lost_processes,omitempty"`
	// Damage: stored outputs found missing or altered, and what was done.
	Damage []string `json:"damage,omitempty"`
	// Hosts of the succeeded steps that ran on a host the run lost: a
	// step that needs their files has them run again first.
	Hosts map[string]string `json:"hosts,omitempty"`
	// Checkpoints are the blobs of the earlier segments' ended steps, in
	// order: Finalize checks each against its digest.
	Checkpoints []Blob `json:"checkpoints,omitempty"`
}

// Letters of Resume.States, in the order of letterStates; 'w' is a step
// skipped because its condition was false.
const stateLetters = "psfkcb"

var letterStates = []StepState{StepPending, StepSucceeded, StepFailed, StepSkipped, StepCancelled, StepBlocked}

// StateLetter encodes an ended (or pending) step for Resume.States.
func StateLetter(s StepState, whenFalse bool) byte {
	if s == StepSkipped && whenFalse {
		return 'w'
	}
	for i, st := range letterStates {
		if st == s {
			return stateLetters[i]
		}
	}
	return '?'
}

// LetterState decodes a letter of Resume.States.
func LetterState(b byte) (s StepState, whenFalse bool, err error) {
	if b == 'w' {
		return StepSkipped, true, nil
	}
	for i := range stateLetters {
		if stateLetters[i] == b {
			return letterStates[i], false, nil
		}
	}
	return "", false, fmt.Errorf("unknown step state letter %q", b)
}

// CheckpointInput is one segment's ended steps, written to
// <run>/segments/<segment>.json for the final report.
type CheckpointInput struct {
	RunDir  string       `json:"run_dir"`
	Segment int          `json:"segment"`
	Steps   []StepResult `json:"steps"`
}

// Trim keeps a result (or a progress answer) under limit bytes of JSON:
// first the envelopes the report can read from disk go, then the
// succeeded and pending steps; StepCounts and StepsOmitted say what is
// left out.
func Trim(r *Result, limit int) {
	// A step is at least minStepBytes of JSON: past limit/minStepBytes
	// steps the result cannot fit, and measuring it would cost a marshal
	// of every step at each progress query.
	if len(r.Steps) <= limit/minStepBytes && Lighten(r, limit) {
		return
	}
	counts := map[StepState]int{}
	kept := r.Steps[:0:0]
	for _, s := range r.Steps {
		counts[s.Status]++
		if s.Status != StepSucceeded && s.Status != StepPending {
			s.Envelope, s.Items = nil, nil
			kept = append(kept, s)
		}
	}
	r.StepCounts, r.StepsOmitted = counts, len(r.Steps)-len(kept)
	r.Steps = kept
	// Still too large (thousands of failures): keep the first ones.
	for len(r.Steps) > 0 && size(r) > limit {
		n := len(r.Steps) / 2
		r.StepsOmitted += len(r.Steps) - n
		r.Steps = r.Steps[:n]
	}
}

// Lighten drops the envelopes stored on disk when the result is over
// limit; it reports whether the result is then within it.
func Lighten(r *Result, limit int) bool {
	if size(r) <= limit {
		return true
	}
	steps := slices.Clone(r.Steps)
	for i := range steps {
		if steps[i].EnvelopeFile != "" {
			steps[i].Envelope = nil
		}
	}
	r.Steps = steps
	return size(r) <= limit
}

// minStepBytes is the least JSON a StepResult takes
// ({"id":"","capability":"","status":"","attempts":0}).
const minStepBytes = 50

func size(r *Result) int {
	// encoding/json writes map keys sorted: the size is the same on every
	// replay (the workflow trims its result and progress with it).
	//workflowcheck:ignore
	b, err := json.Marshal(r)
	if err != nil {
		return 0
	}
	return len(b)
}

// StepsPage is one page of stored resolved steps as LoadSteps returns it:
// what steps share (tool, digest, settings, join, failure handling) is
// written once, so a page of 20,000 similar steps stays small.
type StepsPage struct {
	Shared []ResolvedStep `json:"shared"`
	Steps  []PagedStep    `json:"steps"`
}

// PagedStep is a step of a page: its own fields, and the index of what it
// shares with others.
type PagedStep struct {
	Shared      int            `json:"s"`
	ID          string         `json:"id"`
	Deps        []string       `json:"deps,omitempty"`
	With        map[string]any `json:"with,omitempty"`
	ForEach     any            `json:"for_each,omitempty"`
	ItemName    string         `json:"item_name,omitempty"`
	MaxParallel int            `json:"max_parallel,omitempty"`
	Tolerate    *plan.Tolerate `json:"tolerate,omitempty"`
	When        string         `json:"when,omitempty"`
	Plan        string         `json:"plan,omitempty"`
	PlanValue   any            `json:"plan_value,omitempty"`
}

// PackSteps writes steps as a page.
func PackSteps(steps []ResolvedStep) StepsPage {
	page := StepsPage{Steps: make([]PagedStep, 0, len(steps))}
	index := map[string]int{}
	for _, rs := range steps {
		ps := PagedStep{ID: rs.ID, Deps: rs.Deps, With: rs.With, ForEach: rs.ForEach, ItemName: rs.ItemName, MaxParallel: rs.MaxParallel,
			Tolerate: rs.Tolerate, When: rs.When, Plan: rs.Plan, PlanValue: rs.PlanValue}
		shared := rs
		shared.ID, shared.Deps, shared.With, shared.ForEach, shared.ItemName, shared.MaxParallel = "", nil, nil, nil, "", 0
		shared.Tolerate, shared.When, shared.Plan, shared.PlanValue, shared.Summary = nil, "", "", nil, ""
		key, _ := json.Marshal(shared)
		k, ok := index[string(key)]
		if !ok {
			k = len(page.Shared)
			index[string(key)] = k
			page.Shared = append(page.Shared, shared)
		}
		ps.Shared = k
		page.Steps = append(page.Steps, ps)
	}
	return page
}

// Unpack returns the page's steps in full.
func (p StepsPage) Unpack() ([]ResolvedStep, error) {
	out := make([]ResolvedStep, 0, len(p.Steps))
	for _, ps := range p.Steps {
		if ps.Shared < 0 || ps.Shared >= len(p.Shared) {
			return nil, fmt.Errorf("step %s names shared settings %d of %d", ps.ID, ps.Shared, len(p.Shared))
		}
		rs := p.Shared[ps.Shared]
		rs.ID, rs.Deps, rs.With, rs.ForEach, rs.ItemName, rs.MaxParallel = ps.ID, ps.Deps, ps.With, ps.ForEach, ps.ItemName, ps.MaxParallel
		rs.Tolerate, rs.When, rs.Plan, rs.PlanValue = ps.Tolerate, ps.When, ps.Plan, ps.PlanValue
		rs.Summary = rs.Summarize()
		out = append(out, rs)
	}
	return out, nil
}

// Summarize is the step's summary in the Web UI.
func (rs ResolvedStep) Summarize() string {
	if rs.Plan != "" {
		return rs.ID + " · plan " + rs.Plan
	}
	return StepSummary(rs.ID, rs.Capability, rs.Tool, rs.Version)
}
