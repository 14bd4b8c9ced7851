// Package plantest runs a plan against test cases without tools and
// without a server (docs/plan-tests.md): the real PlanWorkflow, and
// capflow's own activities, in the Temporal SDK's test environment; each
// step's result comes from the case, or is generated from its tool's
// output schema.
package plantest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/internal/workerapp"
	"github.com/capflow/capflow/wire"
)

// outcome is what a case's run came to.
type outcome struct {
	res   *wfapi.Result
	err   error
	calls map[string]int // RunTool calls by step or item label
	// started and ended: when each step's tool first started and last
	// ended, in the order of the test's tool calls.
	started, ended map[string]int
	warnings       []string
}

// testTimeout bounds one case: a minute, and 5 ms a step past 12,000.
func testTimeout(steps int) time.Duration {
	return max(time.Minute, time.Duration(steps)*5*time.Millisecond)
}

// maxSegments bounds the segments one case runs: a plan's run continues
// as new past temporal.segment_events, as on a worker.
const maxSegments = 100

// run executes one case, each segment of its run in an environment of its
// own (the test environment does not continue a run as new), as a worker
// would: the next segment starts from what the last one handed on.
func (r *Suite) run(c *Case, n int) outcome {
	id := fmt.Sprintf("plan-test-%d", n)
	t := &tools{r: r, c: c, workflowID: id, calls: map[string]int{}, started: map[string]int{}, ended: map[string]int{}}
	out := outcome{calls: t.calls, started: t.started, ended: t.ended}
	start := wfapi.Start{Input: wire.Input{Plan: r.value, Inputs: c.Inputs}}
	for segment := 1; ; segment++ {
		env := r.segmentEnv(c, t, id, start)
		env.ExecuteWorkflow(wfapi.WorkflowType, start)
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) && segment < maxSegments {
			start = wfapi.Start{}
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &start); err != nil {
				out.err = err
				return out
			}
			continue
		}
		out.warnings = t.warnings
		if err != nil {
			out.err = err
			return out
		}
		var res wfapi.Result
		if err := env.GetWorkflowResult(&res); err != nil {
			out.err = err
			return out
		}
		out.res = &res
		return out
	}
}

// segmentEnv is the test environment one segment of a case's run runs in.
func (r *Suite) segmentEnv(c *Case, t *tools, id string, start wfapi.Start) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	// The test environment logs every event at debug: not for people.
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	// A large plan's first workflow task schedules all its steps: in this
	// environment, one task, which the worker's 1 s deadlock detection
	// would stop (a worker's tasks are shorter: they yield to the server).
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.SetTestTimeout(testTimeout(len(r.Plan.Steps)))
	if start.Carry != nil {
		env.SetContinuedExecutionRunID(start.Carry.From) // the server names the run that continued
	}
	// The test environment keeps no history: its length grows as a
	// server's would (an activity's three events and a workflow task's
	// three; a local activity's marker), so a run continues as new where
	// it would on a worker.
	length := 3
	grow := func(n int) { length += n; env.SetCurrentHistoryLength(length) }
	env.SetCurrentHistoryLength(length)
	env.SetOnActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) { grow(6) })
	env.SetOnLocalActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) { grow(1) })
	// The worker's own workflows and activities, steps run by the one step
	// executor: only the tools are the case's stand-in.
	workerapp.Register(env, r.activities(t))
	decide := &decider{env: env, c: c, sent: map[string]bool{}}
	env.SetOnTimerScheduledListener(func(string, time.Duration) { decide.soon() })
	// One workflow ID, so one run folder, per case.
	env.SetStartWorkflowOptions(sdkclient.StartWorkflowOptions{ID: id})
	return env
}

// tools is the case's stand-in for every tool.
type tools struct {
	r *Suite
	// workflowID is the case's run (its sub-plans' runs are others).
	workflowID     string
	c              *Case
	mu             sync.Mutex
	calls          map[string]int
	seq            int
	started, ended map[string]int
	warnings       []string
}

// warn notes something a case's result should be read with, once.
func (t *tools) warn(w string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !slices.Contains(t.warnings, w) {
		t.warnings = append(t.warnings, w)
	}
}

// mark counts a tool's start or end in the order of calls.
func (t *tools) mark(m map[string]int, id string, first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	if _, ok := m[id]; !ok || !first {
		m[id] = t.seq
	}
}

// Run answers a step's (or item's) tool as the case says, else with the
// generated result of its tool's output schema (step.Tool).
func (t *tools) Run(ctx context.Context, req toolrun.Request) envelope.Envelope {
	label, id := req.Label, req.StepID
	t.mu.Lock()
	t.calls[label]++
	t.mu.Unlock()
	t.mark(t.started, id, true)
	defer t.mark(t.ended, id, false)
	given, ok := t.c.Steps[label]
	if !ok && label != id {
		given, ok = t.c.Steps[id]
	}
	// A sub-plan's steps (another run) answer with generated results: the
	// case names the plan's own steps.
	ok = ok && req.RunID == t.workflowID
	tool := req.Manifest.Name
	if ok && given.Error != nil {
		code := caperr.Code(given.Error.Code)
		msg := given.Error.Message
		if msg == "" {
			msg = fmt.Sprintf("%s failed (%s, given by the case)", label, code)
		}
		return envelope.NewBuilder(tool).Fail(code, msg, nil)
	}
	gen := t.r.resultOf(tool, req.Manifest.Version)
	data := gen.data
	if ok && given.HasData {
		data = given.Data
	} else if gen.refused != "" {
		t.warn(fmt.Sprintf("%s answered with a generated result its tool's output schema refuses (%s): give steps.%s.data to be exact", id, gen.refused, id))
	}
	return envelope.NewBuilder(tool).Succeed(label+": result given by the test", normal(data))
}

// decider answers steps waiting for a person with the case's decisions.
// A waiting step starts a timer (its ask timeout), which the test
// environment would fire at once: when a timer is scheduled, the progress
// query says which steps wait, and the case's decision goes in first.
type decider struct {
	env  *testsuite.TestWorkflowEnvironment
	c    *Case
	sent map[string]bool
}

func (d *decider) soon() {
	d.env.RegisterDelayedCallback(d.answer, 0)
}

func (d *decider) answer() {
	v, err := d.env.QueryWorkflow(wfapi.ProgressQuery)
	if err != nil {
		return
	}
	var p wfapi.Result
	if v.Get(&p) != nil {
		return
	}
	for _, s := range p.Steps {
		given, ok := d.c.Steps[s.ID]
		if s.Status != wfapi.StepWaiting || !ok || given.Decision == nil || d.sent[s.ID] {
			continue
		}
		d.sent[s.ID] = true
		req := given.Decision.request(s.ID)
		d.env.UpdateWorkflow(wire.UpdateDecide, "plantest-"+s.ID, noopUpdate{}, req)
	}
}

// noopUpdate receives an update's outcome (the result says what it did).
type noopUpdate struct{}

func (noopUpdate) Accept()             {}
func (noopUpdate) Reject(error)        {}
func (noopUpdate) Complete(any, error) {}
