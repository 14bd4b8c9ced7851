package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Describe is what Temporal knows of a run now.
func (c *Client) Describe(ctx context.Context, id string) (*RunInfo, error) {
	desc, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, notFound("run", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	ri := c.runInfo(info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(), info.GetStatus(), info.GetStartTime().AsTime(), info.GetCloseTime(), info.GetSearchAttributes().GetIndexedFields())
	ri.FirstRunID = info.GetFirstRunId()
	ri.TaskQueue = desc.GetExecutionConfig().GetTaskQueue().GetName()
	if wt := desc.GetPendingWorkflowTask(); wt != nil {
		ri.Task = &WorkflowTask{Started: wt.GetState() == enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED, Attempt: wt.GetAttempt(),
			Since: wt.GetOriginalScheduledTime().AsTime()}
		if ri.Task.Started {
			ri.Task.Since = wt.GetStartedTime().AsTime()
		}
	}
	for _, pa := range desc.GetPendingActivities() {
		p := PendingActivity{ActivityID: pa.GetActivityId(), Attempt: pa.GetAttempt(), MaxAttempts: pa.GetMaximumAttempts()}
		p.Step, _ = LabelOfActivity(p.ActivityID)
		if f := pa.GetLastFailure(); f != nil {
			p.LastFailure = c.failureMessage(f.GetMessage(), c.fc.FailureToError(f))
		}
		if t := pa.GetLastStartedTime(); t != nil {
			p.Started = t.AsTime()
		}
		p.Worker = pa.GetLastWorkerIdentity()
		if t := pa.GetLastHeartbeatTime(); t != nil {
			p.LastHeartbeat = t.AsTime()
		}
		if t := pa.GetNextAttemptScheduleTime(); t != nil {
			p.NextAttempt = t.AsTime()
		}
		if o := pa.GetActivityOptions(); o != nil {
			p.HeartbeatTimeout, p.Timeout = o.GetHeartbeatTimeout().AsDuration(), o.GetStartToCloseTimeout().AsDuration()
		}
		var hb Heartbeat
		if d := pa.GetHeartbeatDetails(); d != nil && c.dc.FromPayloads(d, &hb) == nil {
			p.Heartbeat = &hb
			p.Attempt, p.MaxAttempts = hb.StepAttempts(p.Attempt, p.MaxAttempts)
		}
		ri.Pending = append(ri.Pending, p)
	}
	return ri, nil
}

func (c *Client) failureMessage(raw string, err error) string {
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	switch {
	case err == nil:
		return raw
	case errors.As(err, &app):
		return app.Message()
	case errors.As(err, &timeout):
		return timeoutWords(timeout.TimeoutType())
	}
	return err.Error()
}

// timeoutWords says a timeout as a person reads it (Temporal's own words
// are "activity StartToClose timeout (type: StartToClose)").
func timeoutWords(t enumspb.TimeoutType) string {
	switch t {
	case enumspb.TIMEOUT_TYPE_HEARTBEAT:
		return "TASK_TIMEOUT: no heartbeat within its heartbeat timeout (its worker may have gone)"
	case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
		return "TASK_TIMEOUT: ran past its timeout"
	case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
		return "TASK_TIMEOUT: no worker took it in time"
	}
	return "TASK_TIMEOUT: ran past the time it was given"
}

// List lists runs of capflow plans, newest first, at most limit; where is
// a visibility filter ANDed to it ("CapflowStatus = 'failed'", or ""). A
// run that continued as new is listed once, by its latest execution.
func (c *Client) List(ctx context.Context, where string, limit int) ([]RunInfo, error) {
	q := ListQuery(where)
	var out []RunInfo
	var token []byte
	for len(out) < limit {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: int32(limit), NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Executions {
			if len(out) == limit {
				break
			}
			if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
				continue // a segment of a long run: its latest execution stands for it
			}
			out = append(out, *c.runInfo(e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), e.GetStatus(), e.GetStartTime().AsTime(), e.GetCloseTime(), e.GetSearchAttributes().GetIndexedFields()))
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	// Visibility lists open runs first, then closed ones by close time: a
	// run that started long ago but just ended would come before a newer
	// one. Newest start first, as the doc says.
	slices.SortStableFunc(out, func(a, b RunInfo) int { return b.StartedAt.Compare(a.StartedAt) })
	return out, nil
}

// ListQuery is the visibility query List sends for a filter.
func ListQuery(where string) string {
	q := fmt.Sprintf("WorkflowType = '%s'", WorkflowType)
	if where != "" {
		q += " AND " + where
	}
	return q
}

// Where is a visibility filter over search attributes (attribute → value,
// values without quotes), for List; "" for none.
func Where(attrs map[string]string) (string, error) {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[k]
		if v == "" {
			continue
		}
		if strings.ContainsAny(v, `'"\`) {
			return "", fmt.Errorf("%q: quotes are not allowed", v)
		}
		if k == SearchAttrStatus {
			parts = append(parts, StatusFilter(RunStatus(v)))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s = '%s'", k, v))
	}
	return strings.Join(parts, " AND "), nil
}

// StatusFilter is the visibility filter of runs in status s: a status a
// run has while it goes on only of runs Temporal still runs (one
// terminated, or ended before it said otherwise, keeps the last status it
// recorded). s is one of RunStatuses: it is not quoted.
func StatusFilter(s RunStatus) string {
	f := fmt.Sprintf("%s = '%s'", SearchAttrStatus, s)
	if !s.Ended() {
		f += " AND ExecutionStatus = 'Running'"
	}
	return f
}

// FirstInput is the input a run was started with: the first event of its
// first execution. A run whose input carried anything but what a client
// may send (an engine's carry) is refused.
func (c *Client) FirstInput(ctx context.Context, id, firstRunID string) (Input, error) {
	var in Input
	it := c.tc.GetWorkflowHistory(ctx, id, firstRunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("run %s has no history", id)
	}
	ev, err := it.Next()
	if err != nil {
		return in, notFound("run", id, err)
	}
	payloads := ev.GetWorkflowExecutionStartedEventAttributes().GetInput()
	var fields map[string]json.RawMessage
	if payloads == nil {
		return in, fmt.Errorf("run %s was not started with a plan capflow can run again", id)
	}
	if err := c.dc.FromPayloads(payloads, &fields); err != nil {
		// An encrypted input without the key says which key it needs.
		return in, fmt.Errorf("run %s: its input cannot be read: %v", id, err)
	}
	for k := range fields {
		if !slices.Contains([]string{"plan", "plan_file", "request", "inputs", "reuse"}, k) {
			return in, fmt.Errorf("run %s was not started with a plan capflow can run again", id)
		}
	}
	raw, _ := json.Marshal(fields)
	if err := json.Unmarshal(raw, &in); err != nil {
		return in, fmt.Errorf("run %s was not started with a plan capflow can run again", id)
	}
	return in, nil
}

// runInfo reads an execution's fields and its search attributes (which
// are never encoded by a payload codec).
func (c *Client) runInfo(id, runID string, st enumspb.WorkflowExecutionStatus, started time.Time, closed *timestamppb.Timestamp, attrs map[string]*commonpb.Payload) *RunInfo {
	ri := &RunInfo{ID: id, RunID: runID, StartedAt: started, Open: closed == nil,
		Execution: strings.ToLower(strings.TrimPrefix(st.String(), "WorkflowExecutionStatus"))}
	if closed != nil {
		ri.EndedAt = closed.AsTime()
	}
	for key, dst := range map[string]*string{SearchAttrPlan: &ri.Plan, SearchAttrStatus: &ri.Status, SearchAttrSchedule: &ri.Schedule} {
		if p := attrs[key]; p != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(p, dst)
		}
	}
	return ri
}

// Pollers is how many workers the server saw polling queue for workflow
// tasks lately (its last few minutes): 0 means no worker will take a
// run of that queue.
func (c *Client) Pollers(ctx context.Context, queue string) (int, error) {
	if queue == "" {
		queue = c.taskQueue
	}
	resp, err := c.tc.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return 0, err
	}
	return len(resp.GetPollers()), nil
}

// TaskQueue is the queue runs this client starts go to.
func (c *Client) TaskQueue() string { return c.taskQueue }
