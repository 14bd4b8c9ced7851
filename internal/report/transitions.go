package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
)

// Transition is one change of a step's state: report.json keeps each
// step's, so what happened to it reads in order (started, an attempt that
// failed and the next, a decision, how it ended).
type Transition struct {
	State  string `json:"state"`
	At     string `json:"at"`
	Reason string `json:"reason,omitempty"`
}

// Attempt is a failed attempt of a step, as its folder recorded it (one
// JSON line each in AttemptsFileName).
type Attempt struct {
	N       int32       `json:"attempt"`
	Code    caperr.Code `json:"code,omitempty"`
	Message string      `json:"message,omitempty"`
	Started time.Time   `json:"started"`
	Ended   time.Time   `json:"ended"`
}

// AttemptsFileName keeps a step's failed attempts in its folder.
const AttemptsFileName = ".capflow-attempts.jsonl"

// ParseAttempts reads an attempts file's lines; a line it cannot read (a
// worker that died mid-write) is skipped.
func ParseAttempts(raw []byte) []Attempt {
	out := []Attempt{}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		var a Attempt
		if len(line) > 0 && json.Unmarshal(line, &a) == nil {
			out = append(out, a)
		}
	}
	return out
}

// Transitions tells a step's history from its result and the attempts
// its folder recorded, in time order.
func Transitions(s wfapi.StepResult, attempts []Attempt) []Transition {
	var out []Transition
	if s.StartedAt != "" {
		out = append(out, Transition{State: string(wfapi.StepRunning), At: s.StartedAt})
	}
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].N < attempts[j].N })
	for i, a := range attempts {
		last := i == len(attempts)-1 && int(a.N) >= s.Attempts
		if last {
			break // the step's end tells it
		}
		out = append(out, Transition{State: "retrying", At: envelope.Timestamp(a.Ended), Reason: fmt.Sprintf("attempt %d failed (%s): %s", a.N, a.Code, a.Message)})
		if i+1 < len(attempts) {
			out = append(out, Transition{State: string(wfapi.StepRunning), At: envelope.Timestamp(attempts[i+1].Started), Reason: fmt.Sprintf("attempt %d", attempts[i+1].N)})
		}
	}
	for _, d := range s.Decisions {
		// A decision ends a wait (an approval, or a failed step an
		// operator was asked about): when the wait began is not kept.
		out = append(out, Transition{State: "decided", At: d.At, Reason: d.String()})
	}
	if s.EndedAt != "" {
		out = append(out, Transition{State: string(s.Status), At: s.EndedAt, Reason: s.Reason})
	} else if s.Status != wfapi.StepRunning && s.Status != wfapi.StepPending {
		out = append(out, Transition{State: string(s.Status), Reason: s.Reason})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At != "" && out[j].At != "" && out[i].At < out[j].At })
	return out
}
