package workflows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// segmentFakes adds the large-plan activities to the fakes.
type segmentFakes struct {
	*fakes
	checkpoints map[int][]wfapi.StepResult
	loads       int
	// stored: the steps in resolved.json when the resolution left them
	// out (else the resolution's own).
	stored []wfapi.ResolvedStep
	blobs  map[string][]byte
	// tamper, when set, alters each carry before the next segment reads it.
	tamper func(*wfapi.Resume)
}

func (f *segmentFakes) LoadSteps(ctx context.Context, in wfapi.LoadStepsInput) (*wfapi.StepsPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	stored := f.resolved.Steps
	if f.stored != nil {
		stored = f.stored
	}
	page := wfapi.PackSteps(stored[in.Page.From:in.Page.To])
	return &page, nil
}

// PutBlob keeps blob parts in memory; sealing a segment's blob records
// its steps as that segment's checkpoint.
func (f *segmentFakes) PutBlob(ctx context.Context, in wfapi.PutBlobInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.blobs == nil {
		f.blobs = map[string][]byte{}
	}
	key := fmt.Sprintf("%s/%d", in.Name, in.Part)
	f.blobs[key] = in.Data
	if in.Seal == nil {
		return nil
	}
	var whole []byte
	for k := 0; k < in.Seal.Parts; k++ {
		whole = append(whole, f.blobs[fmt.Sprintf("%s/%d", in.Name, k)]...)
	}
	if len(whole) != in.Seal.Size {
		return fmt.Errorf("blob %s: %d bytes, sealed as %d", in.Name, len(whole), in.Seal.Size)
	}
	f.blobs[in.Name] = whole
	var n int
	if _, err := fmt.Sscanf(in.Name, "segment-%d.json", &n); err == nil {
		if _, dup := f.checkpoints[n]; dup {
			return fmt.Errorf("segment %d checkpointed twice", n)
		}
		var steps []wfapi.StepResult
		if err := json.Unmarshal(whole, &steps); err != nil {
			return err
		}
		f.checkpoints[n] = steps
	}
	return nil
}

func (f *segmentFakes) GetBlob(ctx context.Context, in wfapi.GetBlobInput) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	whole, ok := f.blobs[in.Name]
	if !ok {
		return nil, fmt.Errorf("no blob %s", in.Name)
	}
	from := min(len(whole), in.Part*wfapi.BlobPartBytes)
	return whole[from:min(len(whole), from+wfapi.BlobPartBytes)], nil
}

func (f *segmentFakes) Checkpoint(ctx context.Context, in wfapi.CheckpointInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.checkpoints[in.Segment]; dup {
		return fmt.Errorf("segment %d checkpointed twice", in.Segment)
	}
	f.checkpoints[in.Segment] = in.Steps
	return nil
}

// runSegments runs a plan whose history "grows" by perActivity events per
// activity, following continue-as-new the way the server does: each new
// execution starts with a short history.
func runSegments(t *testing.T, f *segmentFakes, perActivity int) (*wfapi.Result, int) {
	t.Helper()
	in := wfapi.Start{Input: wfapi.Input{Plan: map[string]any{"name": "x"}}}
	for segment := 0; segment < 50; segment++ {
		env := newEnv(t, f.fakes)
		env.RegisterActivityWithOptions(f.LoadSteps, activity.RegisterOptions{Name: wfapi.LoadStepsActivity})
		env.RegisterActivityWithOptions(f.Checkpoint, activity.RegisterOptions{Name: wfapi.CheckpointActivity})
		env.RegisterActivityWithOptions(f.PutBlob, activity.RegisterOptions{Name: wfapi.PutBlobActivity})
		env.RegisterActivityWithOptions(f.GetBlob, activity.RegisterOptions{Name: wfapi.GetBlobActivity})
		if in.Carry != nil {
			env.SetContinuedExecutionRunID(in.Carry.From) // the server names the run that continued
		}
		length := 3
		env.SetCurrentHistoryLength(length)
		env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
			if info.ActivityType.Name != wfapi.RunToolActivity {
				return // a segment's own bookkeeping adds a few events only
			}
			length += perActivity
			env.SetCurrentHistoryLength(length)
			env.SetCurrentHistorySize(length * 100) // 100 bytes an event
		})
		env.ExecuteWorkflow(wfapi.WorkflowType, in)
		if !env.IsWorkflowCompleted() {
			t.Fatal("workflow did not complete")
		}
		var can *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); errors.As(err, &can) {
			in = wfapi.Start{}
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
				t.Fatal(err)
			}
			if in.Resume != nil || in.Carry == nil || in.Carry.Segment != segment+1 || in.Plan != nil {
				t.Fatalf("segment %d continued without a carry reference: %+v", segment, in)
			}
			var carry wfapi.Resume
			err := json.Unmarshal(f.blobs[in.Carry.Name], &carry)
			// Stored steps are reloaded; steps never stored travel on.
			if stored := f.resolved.StepsRef != nil; err != nil || (len(carry.Resolved.Steps) == 0) != stored || carry.Resolved.PackedSteps != nil {
				t.Fatalf("segment %d stored the wrong carry (%v; steps stored: %v): %+v", segment, err, stored, carry)
			}
			if f.tamper != nil {
				f.tamper(&carry)
				raw, _ := json.Marshal(carry)
				sum := sha256.Sum256(raw)
				f.blobs[in.Carry.Name], in.Carry.SHA256, in.Carry.Size = raw, hex.EncodeToString(sum[:]), len(raw)
			}
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		var res wfapi.Result
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		return &res, segment
	}
	t.Fatal("the run never ended")
	return nil, 0
}

// A long run continues as new: every step runs exactly once across the
// segments, later steps read data carried from earlier ones, failures and
// skips keep their meaning, and the report gets every step once.
func TestContinueAsNewCarriesTheRun(t *testing.T) {
	var src strings.Builder
	src.WriteString("name: long\nfailure_policy: continue_all\noutputs: {first: \"${steps.s00.data.step}\"}\nsteps:\n")
	src.WriteString("  - {id: s00, capability: x.a}\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&src, "  - {id: s%02d, capability: x.a, needs: [s%02d]}\n", i, i-1)
	}
	src.WriteString("  - {id: bad, capability: x.b, needs: [s03]}\n")
	src.WriteString("  - {id: after-bad, capability: x.c, needs: [bad]}\n")
	src.WriteString("  - {id: sum, capability: x.d, needs: [s11], with: {first: \"${steps.s00.data.step}\"}}\n")
	src.WriteString("  - {id: maybe, capability: x.e, needs: [s11], when: \"steps.s00.success && steps.s00.data.step == 'step-s00'\"}\n")
	rr := resolvedFrom(t, src.String())
	rr.Outputs = map[string]string{"first": "${steps.s00.data.step}"}
	rr.SegmentEvents = 30
	rr.StepsRef = &wfapi.StepsRef{File: "/runs/x/resolved.json", SHA256: "x", Count: len(rr.Steps), Pages: []wfapi.Page{{From: 0, To: 7}, {From: 7, To: len(rr.Steps)}}}
	f := &segmentFakes{fakes: &fakes{resolved: rr, behave: map[string]behaviour{"bad": fail(caperr.TestFailure)}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}},
		checkpoints: map[int][]wfapi.StepResult{}}

	res, segments := runSegments(t, f, 10)
	if segments < 3 {
		t.Fatalf("want at least 3 continue-as-new, got %d", segments)
	}
	if res.Segments != segments || res.RunID == "" {
		t.Fatalf("result says %d segments (run id %q), want %d", res.Segments, res.RunID, segments)
	}
	if res.Status != wfapi.StatusFailed || !strings.Contains(res.Message, "step bad failed") {
		t.Fatalf("status %s: %s", res.Status, res.Message)
	}
	want := "s00=succeeded s01=succeeded s02=succeeded s03=succeeded s04=succeeded s05=succeeded s06=succeeded s07=succeeded s08=succeeded s09=succeeded s10=succeeded s11=succeeded bad=failed after-bad=skipped sum=succeeded maybe=succeeded"
	if got := states(res); got != want {
		t.Fatalf("states\n got %s\nwant %s\n%+v", got, want, res.Steps)
	}
	for id, n := range f.calls {
		if n != 1 {
			t.Fatalf("step %s ran %d times", id, n)
		}
	}
	if len(f.calls) != 15 { // every step but after-bad
		t.Fatalf("%d steps ran, want 15: %v", len(f.calls), f.calls)
	}
	// sum ran in a later segment and still read s00's data.
	if got := f.inputs["sum"].Deps["s00"].Data; !reflect.DeepEqual(got, map[string]any{"step": "step-s00"}) {
		t.Fatalf("sum read s00's data as %v", got)
	}
	// Each step is in exactly one checkpoint or in the final segment.
	seen := map[string]int{}
	for n := 1; n <= segments; n++ {
		for _, s := range f.checkpoints[n] {
			seen[s.ID]++
		}
	}
	fin := f.finalized
	if fin == nil || fin.Segments != segments {
		t.Fatalf("Finalize got %+v segments, want %d", fin, segments)
	}
	for _, s := range fin.Result.Steps {
		seen[s.ID]++
	}
	if len(seen) != len(rr.Steps) {
		t.Fatalf("report would have %d steps, want %d: %v", len(seen), len(rr.Steps), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("step %s is in %d checkpoints", id, n)
		}
	}
	if fin.Resolved == nil || len(fin.Resolved.Steps) != 0 {
		t.Fatal("Finalize must get the lean resolution (steps are stored)")
	}
	if f.loads < 2*segments {
		t.Fatalf("each segment reloads every page: %d loads over %d segments", f.loads, segments)
	}
}

// A history that grows large in bytes before it grows long continues as
// new too, at the size the run recorded.
func TestContinueAsNewBySize(t *testing.T) {
	rr := resolvedFrom(t, chainOfTen("heavy"))
	rr.SegmentBytes = 3000 // 30 events of 100 bytes
	rr.StepsRef = &wfapi.StepsRef{Count: len(rr.Steps), Pages: []wfapi.Page{{From: 0, To: len(rr.Steps)}}}
	f := &segmentFakes{fakes: &fakes{resolved: rr, behave: map[string]behaviour{}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}},
		checkpoints: map[int][]wfapi.StepResult{}}
	res, segments := runSegments(t, f, 10)
	if res.Status != wfapi.StatusPassed || segments < 2 || res.Segments != segments {
		t.Fatalf("%s after %d segments (result says %d): %s", res.Status, segments, res.Segments, res.Message)
	}
}

// Steps the Resolve result carried and never stored (no StepsRef: a small
// plan) travel into each next segment: no segment loads a page, and every
// step runs once.
func TestContinueAsNewCarriesUnstoredSteps(t *testing.T) {
	rr := resolvedFrom(t, chainOfTen("carried"))
	rr.SegmentEvents = 30
	f := &segmentFakes{fakes: &fakes{resolved: rr, behave: map[string]behaviour{}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}},
		checkpoints: map[int][]wfapi.StepResult{}}
	res, segments := runSegments(t, f, 10)
	if res.Status != wfapi.StatusPassed || segments < 2 {
		t.Fatalf("%s after %d segments: %s", res.Status, segments, res.Message)
	}
	if got := states(res); strings.Count(got, "=succeeded") != 10 {
		t.Fatalf("states %s", got)
	}
	if f.loads != 0 || len(f.calls) != 10 {
		t.Fatalf("%d page loads (want 0), %d steps ran (want 10)", f.loads, len(f.calls))
	}
	if fin := f.finalized; fin == nil || fin.Resolved == nil || len(fin.Resolved.Steps) != 10 {
		t.Fatal("Finalize must get the carried steps")
	}
}

// A carry without the steps that were never stored (as a worker older than
// CarrySteps writes it) fails the run as it resumes (its states name steps
// the plan lacks); it never runs none.
func TestCarryWithoutItsStepsFails(t *testing.T) {
	rr := resolvedFrom(t, chainOfTen("old-carry"))
	rr.SegmentEvents = 30
	f := &segmentFakes{fakes: &fakes{resolved: rr, behave: map[string]behaviour{}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}},
		checkpoints: map[int][]wfapi.StepResult{}, tamper: func(r *wfapi.Resume) { r.Resolved.Steps, r.Resolved.Resolution = nil, nil }}
	res, _ := runSegments(t, f, 10)
	if res.Status != wfapi.StatusFailed || !strings.Contains(res.Message, "cannot resume the run: the carried state names 10 steps, the plan has 0") || len(f.calls) == 10 {
		t.Fatalf("%s: %s (%d steps ran)", res.Status, res.Message, len(f.calls))
	}
}

// chainOfTen is a plan of ten chained steps, s00 to s09.
func chainOfTen(name string) string {
	var src strings.Builder
	fmt.Fprintf(&src, "name: %s\nsteps:\n  - {id: s00, capability: x.a}\n", name)
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&src, "  - {id: s%02d, capability: x.a, needs: [s%02d]}\n", i, i-1)
	}
	return src.String()
}

// A fail_fast stop ends the run in its segment: no continue-as-new after.
func TestContinueAsNewStopsOnFailFast(t *testing.T) {
	rr := resolvedFrom(t, chainOfTen("long"))
	rr.SegmentEvents = 30
	rr.StepsRef = &wfapi.StepsRef{Count: len(rr.Steps), Pages: []wfapi.Page{{From: 0, To: len(rr.Steps)}}}
	f := &segmentFakes{fakes: &fakes{resolved: rr, behave: map[string]behaviour{"s05": fail(caperr.TestFailure)}, calls: map[string]int{}, inputs: map[string]wfapi.RunToolInput{}},
		checkpoints: map[int][]wfapi.StepResult{}}
	res, segments := runSegments(t, f, 10)
	if res.Status != wfapi.StatusFailed || segments < 1 {
		t.Fatalf("%s after %d segments: %s", res.Status, segments, res.Message)
	}
	want := "s00=succeeded s01=succeeded s02=succeeded s03=succeeded s04=succeeded s05=failed s06=skipped s07=skipped s08=skipped s09=skipped"
	if got := states(res); got != want {
		t.Fatalf("states\n got %s\nwant %s", got, want)
	}
	if f.callsOf("s06") != 0 {
		t.Fatal("a step after the fail_fast stop ran")
	}
}
