package wfapi

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/verdict"
)

// The worker's result (its domain types) is exactly the client's wire
// type: every field of a full result decodes into client.Result with no
// field unknown to it, and encodes back to the same bytes.
func TestResultIsTheClientsWireType(t *testing.T) {
	ms := int64(3)
	env := envelope.Envelope{ToolID: "t", ExitCode: 1, Timestamp: "2026-01-01T00:00:00.000Z", Message: "m", Data: map[string]any{"k": "v"},
		DurationMS: 4, Feedback: []envelope.Feedback{{Phase: "p", Level: "info", Message: "f", Timestamp: "x", Detail: "d", DurationMS: &ms}},
		Error: &envelope.ErrorInfo{Code: caperr.RetryExhausted, Severity: caperr.High, Cause: caperr.ToolFailure}}
	step := StepResult{ID: "a", Capability: "x.y", Status: StepFailed, Tool: "t", Version: "1", Attempts: 2, Reason: "r", Critical: true,
		StartedAt: "s", EndedAt: "e", DurationMS: 5, DataFile: "f", DataSHA256: "h", Envelope: &env, EnvelopeFile: "ef", JoinNote: "j",
		Execution: "local", InputsSHA256: "i", ReusedFrom: "w", CacheKey: "k", CachedFrom: "cf",
		Artifacts: []Artifact{{Pointer: "/out", Path: "/p", SHA256: "s", Bytes: 1}}, ItemCounts: &ItemCounts{Count: 1, Succeeded: 1}, Items: []ItemResult{{Index: 0, Status: StepSucceeded, Attempts: 1, Reason: "ok"}},
		Child:     &ChildRun{WorkflowID: "c", RunID: "r", Status: StatusPassed, Report: ReportPaths{JSON: "j", Markdown: "m"}},
		Waiting:   &Wait{ID: "a#1", Kind: WaitDecision, Prompt: "p", Since: "s", Until: "u", Actions: WaitDecision.Actions()},
		Decisions: []Decision{{Wait: "a#1", Kind: WaitDecision, Action: ActionRetry, By: "b", Comment: "c", At: "t", Before: "failed X"}}}
	res := Result{Status: StatusFailed, Plan: "p", Message: "m", WorkflowID: "w", RunID: "r", Steps: []StepResult{step},
		StepCounts: map[StepState]int{StepFailed: 1}, StepsOmitted: 1, Segments: 2,
		Gaps: []gap.Gap{{StepID: "g", MissingCapability: "c", Reason: "r", ReasonMessage: "rm", ReasonDetails: map[string]any{"a": 1.0},
			ProposedToolName: "n", ProposedInputSchema: map[string]any{"type": "object"}, ProposedOutputSchema: map[string]any{}, Priority: "high"}},
		Resolution: []gap.StepResolution{{StepID: "a", Capability: "x.y", Tool: "t", Version: "1", Digest: "d", Source: "s", Reason: "r"}},
		Policy: &policy.Report{Source: "policy.yaml", Allowed: false, Violations: []policy.Violation{{Rule: "deny", StepID: "a", Message: "m"}},
			Limits: map[string]int{"max_parallel": 2}, MaxParallel: 2, Notes: []string{"n"}},
		Problems: []verdict.Problem{{File: "f", Line: 1, Column: 2, Field: "x", Message: "m", Code: caperr.InvalidInput}},
		Omitted:  &Omitted{Gaps: 1, Problems: 2, Violations: 3, File: PreflightFile}, Route: &RouteInfo{Kind: "rule", ID: "r"},
		Report: ReportPaths{JSON: "r.json", Markdown: "r.md"}, Outputs: map[string]any{"o": "v"}, Warnings: []string{"w"},
		LostHosts: []string{"h"}, StartedAt: "s", EndedAt: "e", DurationMS: 9, URL: "u"}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var wire client.Result
	if err := dec.Decode(&wire); err != nil {
		t.Fatalf("the client's Result does not hold the worker's: %v", err)
	}
	again, _ := json.Marshal(wire)
	if !bytes.Equal(raw, again) {
		t.Errorf("the client's Result loses or changes fields:\nworker %s\nclient %s", raw, again)
	}
}

// The run statuses the client names are the preflight's.
func TestStatusesMatchPreflight(t *testing.T) {
	if string(StatusPartialComplete) != verdict.PartialComplete || string(StatusBlockedByPolicy) != verdict.BlockedByPolicy || string(StatusInvalid) != verdict.Invalid {
		t.Error("client statuses differ from the preflight's")
	}
}
