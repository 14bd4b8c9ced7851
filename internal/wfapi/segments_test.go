package wfapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/wire"
)

// A page, through JSON as the workflow receives it, unpacks to exactly
// the steps the Resolve result would have carried.
func TestPackStepsRoundTrip(t *testing.T) {
	base := ResolvedStep{Capability: "text.render", Tool: "text-render", Version: "1.0.0", Digest: "sha256:ab", Source: "kit:core",
		StepSettings: plan.StepSettings{Timeout: time.Minute, MaxAttempts: 3, InitialInterval: time.Second, Backoff: 2, MaxInterval: time.Minute},
		Idempotent:   true, Join: plan.Join{Policy: plan.JoinAll}, OnFailure: "retry"}
	var steps []ResolvedStep
	for i := 0; i < 50; i++ {
		s := base
		s.ID = fmt.Sprintf("s%d", i)
		s.With = map[string]any{"template": "t", "values": map[string]any{"n": i}}
		if i > 0 {
			s.Deps = []string{fmt.Sprintf("s%d", i-1)}
		}
		switch i % 5 {
		case 1:
			s.Join, s.OnFailure, s.Critical = plan.Join{Policy: plan.JoinQuorum, Min: 1}, "skip", true
		case 2:
			s.ForEach, s.ItemName, s.MaxParallel, s.Tolerate, s.When = "${steps.s0.data.files}", "f", 4, &plan.Tolerate{Failures: 1}, "inputs.go"
		case 3:
			s.Plan, s.PlanValue, s.Tool, s.Version, s.Digest = "plans/sub.yaml", map[string]any{"name": "sub"}, "", "", ""
		case 4:
			s.StepSettings.Timeout, s.TaskQueue = 5*time.Second, "gpu"
		}
		s.Summary = s.Summarize()
		steps = append(steps, s)
	}
	var want []ResolvedStep
	roundTrip(t, steps, &want)
	var page StepsPage
	roundTrip(t, PackSteps(steps), &page)
	got, err := page.Unpack()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("unpacked steps differ\n got %+v\nwant %+v", got[3], want[3])
	}
	if len(page.Shared) != 4 {
		t.Fatalf("%d shared entries, want 4 (base, quorum, sub-plan, gpu)", len(page.Shared))
	}
	packed, _ := json.Marshal(PackSteps(steps))
	full, _ := json.Marshal(steps)
	if len(packed)*2 > len(full) {
		t.Fatalf("a page of similar steps is %d bytes, the steps %d: want under half", len(packed), len(full))
	}
	if _, err := (StepsPage{Steps: []PagedStep{{ID: "x", Shared: 3}}}).Unpack(); err == nil || !strings.Contains(err.Error(), "step x") {
		t.Fatalf("a page naming missing shared settings: %v", err)
	}
}

func roundTrip(t *testing.T, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

func TestStateLetters(t *testing.T) {
	for _, st := range []StepState{StepPending, StepSucceeded, StepFailed, StepSkipped, StepCancelled, StepBlocked} {
		for _, wf := range []bool{false, true} {
			if wf && st != StepSkipped {
				continue
			}
			got, gotWF, err := LetterState(StateLetter(st, wf))
			if err != nil || got != st || gotWF != wf {
				t.Fatalf("%s/%v came back %s/%v (%v)", st, wf, got, gotWF, err)
			}
		}
	}
	if _, _, err := LetterState('r'); err == nil {
		t.Fatal("a running step cannot be carried: 'r' must be refused")
	}
}

// Trim keeps what did not succeed and counts the rest, under the limit.
func TestTrim(t *testing.T) {
	r := &Result{Status: StatusFailed}
	for i := 0; i < 3000; i++ {
		s := StepResult{ID: fmt.Sprintf("s%d", i), Status: StepSucceeded, EnvelopeFile: "/runs/x/e.json",
			Envelope: &wire.Envelope{ToolID: "t", Success: true, Message: strings.Repeat("m", 100)}}
		switch {
		case i == 7:
			s.Status, s.Reason = StepFailed, "boom"
		case i%1000 == 9:
			s.Status = StepPending
		}
		r.Steps = append(r.Steps, s)
	}
	small := &Result{Steps: r.Steps[:3]}
	Trim(small, MaxResultBytes)
	if small.Steps[0].Envelope == nil || small.StepsOmitted != 0 {
		t.Fatal("a small result must stay whole")
	}
	Trim(r, 100<<10)
	if size(r) > 100<<10 {
		t.Fatalf("trimmed result is %d bytes", size(r))
	}
	if len(r.Steps) != 1 || r.Steps[0].ID != "s7" || r.StepsOmitted != 2999 {
		t.Fatalf("kept %d steps (%+v), omitted %d", len(r.Steps), r.Steps, r.StepsOmitted)
	}
	if r.StepCounts[StepSucceeded] != 2996 || r.StepCounts[StepFailed] != 1 || r.StepCounts[StepPending] != 3 {
		t.Fatalf("counts %v", r.StepCounts)
	}
}
