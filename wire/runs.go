package wire

import (
	"fmt"
	"time"
)

// Search attributes capflow runs carry (plan and status; Temporal's own
// schedule attribute names the schedule that started a run).
const (
	SearchAttrPlan     = "CapflowPlan"
	SearchAttrStatus   = "CapflowStatus"
	SearchAttrSchedule = "TemporalScheduledById"
)

// Heartbeat is what a running step's heartbeats carry: its attempt, its
// latest feedback event, its last stderr lines (LineSeq counts every line
// it printed, so a viewer prints only those it has not seen).
type Heartbeat struct {
	Attempt int32     `json:"attempt"`
	Latest  *Feedback `json:"latest,omitempty"`
	Lines   []string  `json:"lines,omitempty"`
	LineSeq int       `json:"line_seq,omitempty"`
	// ActivityAttempt is Temporal's attempt of the activity that sent it,
	// and MaxAttempts the step's whole: a step that continues as another
	// activity (after a local or an eager attempt) counts on from its
	// attempts before, which Temporal's count of the activity does not.
	ActivityAttempt int32 `json:"activity_attempt,omitempty"`
	MaxAttempts     int32 `json:"max_attempts,omitempty"`
}

// RunInfo is what Temporal knows of a run's latest execution.
type RunInfo struct {
	ID         string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	FirstRunID string `json:"first_run_id,omitempty"`
	// Open: the run has not ended. Execution is Temporal's status of the
	// execution in lower case ("running", "completed", "terminated", ...).
	Open      bool      `json:"open"`
	Execution string    `json:"execution"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"` // zero while open
	// From the search attributes: the plan, capflow's status, the
	// schedule that started it.
	Plan     string `json:"plan"`
	Status   string `json:"status"`
	Schedule string `json:"schedule,omitempty"`
	// Pending are its running activities (Describe only).
	Pending []PendingActivity `json:"pending,omitempty"`
	// TaskQueue is the run's workflow task queue (Describe only).
	TaskQueue string `json:"task_queue,omitempty"`
	// Task is its workflow task while one is pending (Describe only).
	Task *WorkflowTask `json:"workflow_task,omitempty"`
}

// WorkflowTask is a run's pending workflow task: taken by a worker
// (Started) or waiting for one, since when, and its attempt (past 1: the
// workers failed it).
type WorkflowTask struct {
	Started bool      `json:"started"`
	Attempt int32     `json:"attempt"`
	Since   time.Time `json:"since"`
}

// Why says why a run's progress query went unanswered, from its workflow
// task as the server knows it.
func (t *WorkflowTask) Why(now time.Time) string {
	switch {
	case t == nil:
		return "the run's workers did not answer in time"
	case t.Attempt > 1:
		return fmt.Sprintf("the run's workflow task failed %d times and is retried (the worker's log says why)", t.Attempt-1)
	case !t.Started:
		return fmt.Sprintf("no worker has taken the run's workflow task for %s (its worker may be gone)", now.Sub(t.Since).Round(time.Second))
	}
	return fmt.Sprintf("a worker holds the run's workflow task, %s so far (a local step runs, or that worker is gone)", now.Sub(t.Since).Round(time.Second))
}

// PendingActivity is a running activity of a run: a step's (ActivityID
// "step-<id>"), or capflow's own.
type PendingActivity struct {
	ActivityID string `json:"activity_id"`
	// Step is the step or item ("x[3]") it runs (LabelOfActivity; empty
	// for capflow's own activities).
	Step string `json:"step,omitempty"`
	// Attempt and MaxAttempts are the step's (counting the attempts it
	// made as another activity before, where its heartbeat says so).
	Attempt     int32 `json:"attempt"`
	MaxAttempts int32 `json:"max_attempts"`
	// LastFailure is the message of the attempt before this one.
	LastFailure string     `json:"last_failure,omitempty"`
	Started     time.Time  `json:"started"`
	Heartbeat   *Heartbeat `json:"heartbeat,omitempty"`
	// Worker is the worker that holds (or last held) the attempt;
	// LastHeartbeat when it last heartbeated (zero: never);
	// HeartbeatTimeout and Timeout the attempt's (0: none); NextAttempt
	// when the next attempt starts, while the step waits out a back-off.
	Worker           string        `json:"worker,omitempty"`
	LastHeartbeat    time.Time     `json:"last_heartbeat,omitzero"`
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	Timeout          time.Duration `json:"timeout,omitempty"`
	NextAttempt      time.Time     `json:"next_attempt,omitzero"`
}

// StepAttempts turns an activity's attempt and maximum into its step's:
// the offset between the two counts is the heartbeat's (Temporal keeps an
// activity's last heartbeat for its next attempt).
func (hb Heartbeat) StepAttempts(attempt, maxAttempts int32) (int32, int32) {
	if hb.ActivityAttempt <= 0 {
		return attempt, maxAttempts
	}
	attempt += hb.Attempt - hb.ActivityAttempt
	if hb.MaxAttempts >= attempt { // 0: no limit
		maxAttempts = hb.MaxAttempts
	}
	return attempt, maxAttempts
}
