// How a run's stored steps and blobs travel: packed in the resolution,
// or loaded by page; blob parts in groups.

package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/wfapi"
)

// A resolution that carried its stored steps packed runs without loading
// a page; a segment after continue-as-new loads them (its carry is lean).
func TestPackedStepsRunWithoutLoading(t *testing.T) {
	all := "s00=succeeded s01=succeeded s02=succeeded s03=succeeded s04=succeeded s05=succeeded s06=succeeded s07=succeeded s08=succeeded s09=succeeded"
	for _, c := range []struct {
		name      string
		segEvents int
		carry     func([]wfapi.ResolvedStep) []wfapi.ResolvedStep // what the resolution packs
		status    wfapi.RunStatus
		states    string
		message   string
	}{
		{name: "one segment", status: wfapi.StatusPassed, states: all},
		{name: "segments", segEvents: 30, status: wfapi.StatusPassed, states: all},
		{name: "a step short", carry: func(s []wfapi.ResolvedStep) []wfapi.ResolvedStep { return s[1:] },
			status: wfapi.StatusFailed, message: "cannot load the resolved steps: the resolution carried 9 steps, want 10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rr := resolvedFrom(t, chainOfTen("packed"))
			steps := rr.Steps
			carried := steps
			if c.carry != nil {
				carried = c.carry(steps)
			}
			packed := wfapi.PackSteps(carried)
			rr.StepsRef = &wfapi.StepsRef{Count: len(steps), Pages: []wfapi.Page{{From: 0, To: len(steps)}}}
			rr.Steps, rr.Resolution, rr.PackedSteps, rr.SegmentEvents = nil, nil, &packed, c.segEvents
			f := &segmentFakes{fakes: &fakes{resolved: rr, behave: map[string]behaviour{}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}},
				checkpoints: map[int][]wfapi.StepResult{}, stored: steps}
			res, segments := runSegments(t, f, 10)
			if res.Status != c.status || !strings.Contains(res.Message, c.message) {
				t.Fatalf("%s: %s", res.Status, res.Message)
			}
			if c.segEvents > 0 && segments < 1 {
				t.Fatal("the run never continued as new")
			}
			if f.loads != segments {
				t.Fatalf("%d page loads over %d segments: only the segments after the first load", f.loads, segments)
			}
			if got := states(res); c.states != "" && got != c.states {
				t.Fatalf("states\n got %s\nwant %s", got, c.states)
			}
			if f.finalized == nil || f.finalized.Resolved == nil || f.finalized.Resolved.PackedSteps != nil || len(f.finalized.Resolved.Steps) != 0 {
				t.Fatal("Finalize must get the lean resolution")
			}
		})
	}
}

// A blob of many parts is sent a few parts at a time (at most 4, 1 MB): a
// workflow task's completion carries every input it schedules, and the
// server refuses one past 4 MB.
func TestBlobPartsInGroups(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := 0, 0
	put := func(ctx context.Context, in wfapi.PutBlobInput) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		// Every group has 2 or more parts (4, 4, 2, then the sealing part
		// alone): wait (a while, on a loaded machine) for a second one.
		deadline := time.Now().Add(2 * time.Second)
		if in.Seal != nil {
			deadline = time.Now()
		}
		for ; time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			n := inFlight
			mu.Unlock()
			if n >= 2 {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	}
	store := func(ctx workflow.Context) (wfapi.Blob, error) {
		opts := workflow.ActivityOptions{StartToCloseTimeout: time.Minute}
		return storeBlob(ctx, opts, "", "big.json", strings.Repeat("x", 10*wfapi.BlobPartBytes+5))
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(store, workflow.RegisterOptions{Name: "store"})
	env.RegisterActivityWithOptions(put, activity.RegisterOptions{Name: wfapi.PutBlobActivity})
	env.ExecuteWorkflow("store")
	var b wfapi.Blob
	if err := env.GetWorkflowResult(&b); err != nil || b.Parts != 11 {
		t.Fatalf("%+v %v", b, err)
	}
	if most > 4 || most < 2 {
		t.Fatalf("%d parts were sent at once, want 2 to 4", most)
	}
}
