package plantest

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/internal/whatnext"
)

// Result is how one case went.
type Result struct {
	Name string `json:"name"`
	Line int    `json:"line,omitempty"`
	// Passed: every expectation held (a case with none passes when its
	// run ended).
	Passed bool   `json:"passed"`
	Status string `json:"status"`
	// Diffs are the expectations that did not hold, each "what: expected
	// X, got Y".
	Diffs []string `json:"diffs,omitempty"`
	// Warnings are what to read the result with (steps that answered
	// with a generated result their schema refuses).
	Warnings []string `json:"warnings,omitempty"`
	// Steps is each step's state in the run.
	Steps      map[string]string `json:"steps"`
	DurationMS int64             `json:"duration_ms"`
	// Generated: a happy-path case made up because there was no case file.
	Generated bool `json:"generated,omitempty"`
}

// check compares a case's run with its expectations.
func check(c *Case, o outcome) *Result {
	r := &Result{Name: c.Name, Line: c.Line, Steps: map[string]string{}, Warnings: o.warnings}
	if o.err != nil {
		r.Status = "error"
		r.Diffs = append(r.Diffs, "the run did not end: "+o.err.Error())
		return r
	}
	res := o.res
	r.Status = string(res.Status)
	for _, s := range res.Steps {
		r.Steps[s.ID] = string(s.Status)
	}
	e := c.Expect
	if e.Status != "" && e.Status != r.Status {
		r.Diffs = append(r.Diffs, fmt.Sprintf("status: expected %s, got %s (%s)", e.Status, r.Status, res.Message))
	}
	for _, id := range slices.Sorted(maps.Keys(e.Steps)) {
		if got := r.Steps[id]; got != e.Steps[id] {
			r.Diffs = append(r.Diffs, fmt.Sprintf("steps.%s: expected %s, got %s%s", id, e.Steps[id], orNone(got), stepWhy(res, id)))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.Outputs)) {
		want, got := normal(e.Outputs[name]), normal(res.Outputs[name])
		if !reflect.DeepEqual(want, got) {
			r.Diffs = append(r.Diffs, fmt.Sprintf("outputs.%s: expected %s, got %s", name, js(want), js(got)))
		}
	}
	if e.Next != nil {
		got := map[string]string{}
		for _, n := range whatnext.Of(res) {
			got[n.Step] = string(n.Code)
		}
		if !maps.Equal(got, e.Next) {
			r.Diffs = append(r.Diffs, fmt.Sprintf("next: expected %s, got %s", js(e.Next), js(got)))
		}
	}
	for _, p := range e.Order {
		if why := o.before(res, p[0], p[1]); why != "" {
			r.Diffs = append(r.Diffs, fmt.Sprintf("order: expected %s to end before %s started: %s", p[0], p[1], why))
		}
	}
	r.Passed = len(r.Diffs) == 0
	return r
}

// stepWhy is a step's reason or error, to explain a state not expected.
func stepWhy(res *wfapi.Result, id string) string {
	for _, s := range res.Steps {
		if s.ID != id {
			continue
		}
		switch {
		case s.Envelope != nil && s.Envelope.Error != nil:
			return fmt.Sprintf(" (%s: %s)", s.Envelope.Error.Code, s.Envelope.Message)
		case s.Reason != "":
			return " (" + s.Reason + ")"
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "nothing (it is not in the result)"
	}
	return s
}

// normal is v as JSON decodes it: YAML's integers equal JSON's numbers,
// and a copy that shares no map or slice with v.
func normal(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func js(v any) string {
	if v == nil {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// before says why step a did not end before b started ("" when it did):
// in the order of their tools' calls, or, for a step that calls no tool
// (an approval, a sub-plan), by the run's clock.
func (o outcome) before(res *wfapi.Result, a, b string) string {
	ea, okA := o.ended[a]
	sb, okB := o.started[b]
	if okA && okB {
		if ea > sb {
			return b + " started while " + a + " ran"
		}
		return ""
	}
	times := map[string]wfapi.StepResult{}
	for _, s := range res.Steps {
		times[s.ID] = s
	}
	ta, tb := times[a], times[b]
	switch {
	case ta.EndedAt == "":
		return a + " never ended"
	case tb.StartedAt == "":
		return b + " never started"
	case ta.EndedAt > tb.StartedAt:
		return b + " started at " + tb.StartedAt + ", before " + a + " ended at " + ta.EndedAt
	}
	return ""
}

// describe is a failed case's report for people: one line per diff.
func (r *Result) describe() string {
	return strings.Join(slices.Clone(r.Diffs), "\n")
}
