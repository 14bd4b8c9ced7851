package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// The trust boundary (docs/workflow.md, "What a client may send"): a
// client's input is {plan | plan_file | request, inputs, reuse}, nothing
// else. The engine's own carry between segments is stored in the run
// folder and referenced by digest; a run accepts it only as the
// continuation of an earlier run. Runs recorded before this boundary
// replay as they ran.

// admit checks a run's input; it returns what it refuses (nothing read,
// written or run before this).
func admit(ctx workflow.Context, s *wfapi.Start) []wire.Problem {
	info := workflow.GetInfo(ctx)
	// Only the server sets ContinuedExecutionRunID, and only a run that
	// continued as new (or a cron run, which repeats its client's input)
	// may carry the engine's state.
	// A retried run repeats its client's first input too: only a first
	// attempt continues, and a carry only from the run that stored it.
	continued := info.ContinuedExecutionRunID != "" && info.CronSchedule == "" && info.Attempt <= 1
	if !continued || (s.Carry != nil && s.Carry.From != info.ContinuedExecutionRunID) {
		s.RefuseEngineFields()
	}
	if info.ParentWorkflowExecution == nil {
		s.RefuseParentInputs()
	}
	s.Validate()
	return s.Refused
}

// refuse ends a run whose input was refused: no activity, no report.
func refuse(ctx workflow.Context, res *wfapi.Result, started time.Time, refused []wire.Problem) *wfapi.Result {
	res.Status, res.Message, res.Problems = wfapi.StatusFailed, wfapi.RefusedMessage(refused), refused
	endStatus(ctx, res.Status)
	ended := workflow.Now(ctx)
	res.EndedAt, res.DurationMS = envelope.Timestamp(ended), ended.Sub(started).Milliseconds()
	workflow.GetLogger(ctx).Warn("workflow input refused", "field", refused[0].Field, "message", refused[0].Message)
	return res
}

// carryOptions are the options of the activities that store and load a
// segment's blobs: on the run's host, where its folder is.
func carryOptions(host string, segment int) workflow.ActivityOptions {
	o := workflow.ActivityOptions{
		TaskQueue: host, StartToCloseTimeout: time.Minute, RetryPolicy: localRetry,
		Summary: fmt.Sprintf("checkpoint: segment %d", segment),
	}
	if host != "" {
		// The carry is on that host's disk: a lost host fails the run,
		// naming the wait, instead of holding it forever.
		o.ScheduleToStartTimeout = HostWait
	}
	return o
}

// loadCarry reads the state the previous segment stored.
func loadCarry(ctx workflow.Context, c *wfapi.CarryRef) (*wfapi.Resume, error) {
	var r wfapi.Resume
	if err := loadBlob(ctx, carryOptions(c.Host, c.Segment), "", c.Blob, &r); err != nil {
		return nil, err
	}
	if r.Segment != c.Segment {
		return nil, fmt.Errorf("the stored carry is of segment %d, not %d", r.Segment, c.Segment)
	}
	return &r, nil
}

// storeSegment writes a drained segment's ended steps and the carry into
// the run folder; the next segment starts from the returned reference.
func storeSegment(ctx workflow.Context, sched *scheduler, carry *wfapi.Resume) (*wfapi.CarryRef, error) {
	n := sched.segment + 1
	opts := onHost(sched.rr, carryOptions("", n))
	seg, err := storeBlob(ctx, opts, "", fmt.Sprintf("segment-%d.json", n), sched.ended())
	if err != nil {
		return nil, err
	}
	carry.Checkpoints = append(slices.Clone(sched.checkpoints), seg)
	b, err := storeBlob(ctx, opts, "", fmt.Sprintf("carry-%d.json", n), carry)
	if err != nil {
		return nil, err
	}
	return &wfapi.CarryRef{Blob: b, Segment: n, Host: opts.TaskQueue, From: workflow.GetInfo(ctx).WorkflowExecution.RunID}, nil
}

// loadParentInputs reads a sub-plan run's inputs from its parent's folder
// (admit accepted the reference only because the server says this run
// has a parent); the blob's digest is checked as it is read.
func loadParentInputs(ctx workflow.Context, p *wfapi.ParentInputs) (map[string]any, error) {
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	opts := carryOptions(p.Host, 0)
	opts.Summary = "load the inputs the parent run stored"
	var v map[string]any
	if err := loadBlob(ctx, opts, parent.ID, p.Blob, &v); err != nil {
		return nil, err
	}
	return v, nil
}
