package activities

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// The timeout warning comes while the attempt runs, at 80% of its
// timeout, in its heartbeats (the Web UI's pending activity, capflow
// run's progress).
func TestTimeoutWarningWhileRunning(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var mu sync.Mutex
	var warned []string
	seen := make(chan struct{})
	var once sync.Once
	slow := func(ctx context.Context) error {
		hb := startBeats(ctx, step.Attempt{Number: 1})
		defer hb.stop()
		// Ends once the warning (at 1.6 s) reached the server's side, well
		// before its timeout: not as soon as it was recorded here, which
		// raced the heartbeat's delivery (a heartbeat still in flight when
		// the activity ends is dropped).
		select {
		case <-seen:
		case <-time.After(1900 * time.Millisecond):
		}
		return nil
	}
	env.RegisterActivityWithOptions(slow, activity.RegisterOptions{Name: "slow"})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 2 * time.Second})
		return workflow.ExecuteActivity(ctx, "slow").Get(ctx, nil)
	}, workflow.RegisterOptions{Name: "w"})
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var hb wfapi.Heartbeat
		if details.Get(&hb) == nil && hb.Latest != nil && hb.Latest.Phase == "timeout" {
			mu.Lock()
			warned = append(warned, hb.Latest.Message)
			mu.Unlock()
			once.Do(func() { close(seen) })
		}
	})
	env.ExecuteWorkflow("w")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warned) == 0 || !strings.Contains(warned[0], "running for 80% of its 2s timeout") {
		t.Fatalf("heartbeat warnings %q", warned)
	}
}

// A step that continues as another activity (after a local or an eager
// attempt) says at once, in a heartbeat, which of its attempts this is:
// Temporal counts the new activity's from 1 (client.Heartbeat). One that
// does not continue beats on its ticker only.
func TestAContinuedStepSaysItsAttemptAtOnce(t *testing.T) {
	for _, c := range []struct {
		name    string
		at      step.Attempt
		beats   int
		attempt int32
	}{
		{"continued", step.Attempt{Number: 3, Max: 5}, 1, 3},
		{"first activity", step.Attempt{Number: 1, Max: 5}, 0, 0},
	} {
		got := heartbeatsOf(t, func(ctx context.Context) error {
			hb := startBeats(ctx, c.at)
			hb.stop()
			return nil
		})
		if len(got) != c.beats || (c.beats > 0 && (got[0].Attempt != c.attempt || got[0].ActivityAttempt != 1 || got[0].MaxAttempts != c.at.Max)) {
			t.Errorf("%s: heartbeats %+v", c.name, got)
		}
	}
}

// A tool's burst of stderr lines shares its heartbeats: at most one each
// soonAfter, carrying the last lines (a beat a line cost the worker the
// heartbeat's encoding each: a million empty lines, 4 s of its CPU).
func TestABurstOfLinesSharesItsBeats(t *testing.T) {
	got := heartbeatsOf(t, func(ctx context.Context) error {
		hb := startBeats(ctx, step.Attempt{Number: 1})
		defer hb.stop()
		for i := range 100000 {
			hb.stderr(fmt.Sprintf("line %d", i))
		}
		time.Sleep(2 * soonAfter)
		return nil
	})
	// The burst lasts well under soonAfter here; on a slow machine it may
	// span a few.
	if len(got) == 0 || len(got) > 20 || got[len(got)-1].LineSeq != 100000 || got[len(got)-1].Lines[len(got[len(got)-1].Lines)-1] != "line 99999" {
		t.Fatalf("%d heartbeats for 100,000 lines, the last %+v", len(got), got[max(len(got)-1, 0):])
	}
}

// A tool that prints its error and exits at once has it in the attempt's
// last heartbeat: a beat still due goes out when the beats stop.
func TestTheLastLinesBeatAtTheEnd(t *testing.T) {
	got := heartbeatsOf(t, func(ctx context.Context) error {
		hb := startBeats(ctx, step.Attempt{Number: 1})
		hb.stderr("error: no such file")
		hb.stop()
		return nil
	})
	if len(got) != 1 || len(got[0].Lines) != 1 || got[0].Lines[0] != "error: no such file" {
		t.Fatalf("heartbeats %+v", got)
	}
}

// heartbeatsOf runs act as an activity with a minute to run and returns
// the heartbeats it recorded, in order.
func heartbeatsOf(t *testing.T, act func(ctx context.Context) error) []wfapi.Heartbeat {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var got []wfapi.Heartbeat
	var mu sync.Mutex
	env.RegisterActivityWithOptions(act, activity.RegisterOptions{Name: "act"})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		return workflow.ExecuteActivity(ctx, "act").Get(ctx, nil)
	}, workflow.RegisterOptions{Name: "w"})
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var hb wfapi.Heartbeat
		if details.Get(&hb) == nil {
			mu.Lock()
			got = append(got, hb)
			mu.Unlock()
		}
	})
	env.ExecuteWorkflow("w")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}
