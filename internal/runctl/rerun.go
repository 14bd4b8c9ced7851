// Package runctl holds the run-control requests the CLI and the web
// console both make, so both answer with the same validation messages.
package runctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/suggest"
	"github.com/capflow/capflow/internal/wfapi"
)

// RunError names a run that does not exist as such (INVALID_INPUT), any
// other failure to reach it as DEPENDENCY_UNAVAILABLE.
func RunError(id string, err error, what string) error {
	var nf *client.NotFound
	if errors.As(err, &nf) {
		return caperr.New(caperr.InvalidInput, "no run with ID %q", id)
	}
	return caperr.Wrap(caperr.DependencyUnavailable, err, "%s %s", what, id)
}

// Earlier returns the input an ended run was started with (from the first
// event of its first execution) and its result.
func Earlier(ctx context.Context, tc *client.Client, id string) (client.Input, *client.Result, error) {
	var in client.Input
	info, err := tc.Describe(ctx, id)
	if err != nil {
		return in, nil, RunError(id, err, "describe")
	}
	if info.Open {
		return in, nil, caperr.New(caperr.InvalidInput, "%s is still running: rerun a run that ended", id)
	}
	if in, err = tc.FirstInput(ctx, id, info.FirstRunID); err != nil {
		return in, nil, caperr.Wrap(caperr.InvalidInput, err, "")
	}
	res, err := tc.Get(id).Wait(ctx)
	if err != nil {
		return in, nil, caperr.Wrap(caperr.ToolFailure, err, "run %s ended with an error", id)
	}
	return in, res, nil
}

// Rerun prepares a new run of run id's plan and inputs that reuses the
// steps that succeeded, except from and what follows it ("": none): its
// input and start options (newID "": the caller names it).
func Rerun(ctx context.Context, tc *client.Client, id, from, newID string) (client.Input, client.StartOptions, *client.Result, error) {
	if newID != "" {
		if err := CheckID(newID); err != nil {
			return client.Input{}, client.StartOptions{}, nil, err
		}
	}
	in, prev, err := Earlier(ctx, tc, id)
	if err != nil {
		return in, client.StartOptions{}, nil, err
	}
	if from != "" && prev.StepsOmitted == 0 {
		var ids []string
		for _, s := range prev.Steps {
			ids = append(ids, s.ID)
		}
		if !slices.Contains(ids, from) {
			return in, client.StartOptions{}, nil, caperr.New(caperr.InvalidInput, "run %s has no step %q%s (its steps: %s)", id, from,
				suggest.Phrase(from, ids), strings.Join(ids, ", ")).At("", 0, 0, "--from")
		}
	}
	in.Reuse = &client.Reuse{WorkflowID: id, From: from}
	summary := fmt.Sprintf("plan %s · rerun of %s", prev.Plan, id)
	if from != "" {
		summary += " from " + from
	}
	return in, client.StartOptions{ID: newID, Summary: summary}, prev, nil
}

// UpdateError turns what Temporal says of a control request into the
// contract's table: a request the run refused, or a run that is not there
// or has ended, is the caller's (INVALID_INPUT); a server that cannot be
// reached is not.
func UpdateError(id string, err error) error {
	var nf *client.NotFound
	var refused *client.Refused
	switch {
	case errors.As(err, &nf):
		return caperr.New(caperr.InvalidInput, "no running run with ID %q (it does not exist or has ended)", id)
	case errors.As(err, &refused) && refused.RunEnded():
		return Ended(id, "", refused.Reason)
	case errors.As(err, &refused):
		return caperr.New(caperr.InvalidInput, "refused: %s", refused.Reason)
	}
	return caperr.Wrap(caperr.DependencyUnavailable, err, "update %s", id)
}

// Ended refuses a request to a run that has ended (reason says so, and
// what was decided), saying how to run it again: from step when the
// request named one.
func Ended(id, step, reason string) error {
	from := "STEP"
	if step != "" {
		from = step
	}
	return caperr.New(caperr.InvalidInput, "refused: %s (capflow rerun %s --from %s runs it again from a step; capflow rerun %s, all of it)", reason, id, from, id)
}

// CheckTimeout checks a retry's longer timeout ("" keeps the step's).
func CheckTimeout(timeout string) error {
	if timeout == "" {
		return nil
	}
	if d, err := time.ParseDuration(timeout); err != nil || d <= 0 {
		return caperr.New(caperr.InvalidInput, "%q is not a positive duration like 30s or 5m", timeout).At("", 0, 0, "--timeout")
	}
	return nil
}

// MaxIDLength bounds a workflow ID: Temporal on PostgreSQL or MySQL keeps
// IDs in VARCHAR(255), and a run's children add ".STEP" or
// ".STEP.items-N" to its ID (deploy/temporal/capflow.yaml sets the
// server's limit to 255 too).
const MaxIDLength = 200

// maxPlanPart keeps a generated ID well within MaxIDLength.
const maxPlanPart = 120

// CheckID refuses a workflow ID a SQL-backed server could not store, or
// whose children's IDs would not fit, or that capflow keeps for its
// limits' workflows (INVALID_INPUT).
func CheckID(id string) error {
	if strings.TrimSpace(id) != id || id == "" {
		return caperr.New(caperr.InvalidInput, "workflow ID %q: empty, or blank at an end", id)
	}
	if strings.HasPrefix(id, wfapi.LimitIDPrefix) {
		return caperr.New(caperr.InvalidInput, "workflow ID %q: IDs starting %q are capflow's limits', never a run's", id, wfapi.LimitIDPrefix)
	}
	if len(id) > MaxIDLength {
		return caperr.New(caperr.InvalidInput, "workflow ID of %d bytes: at most %d (Temporal on SQL stores 255, and sub-plans and batches add their step's id)", len(id), MaxIDLength)
	}
	return nil
}

// NewWorkflowID is a new run's ID: capflow-<plan, lowercased, at most 120
// characters>-<8 hex>.
func NewWorkflowID(planName string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 32
		}
		return '-'
	}, planName)
	if len(name) > maxPlanPart {
		name = name[:maxPlanPart]
	}
	return "capflow-" + name + "-" + hex.EncodeToString(b)
}
