package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/wfapi"
)

// PathInline: the step's builtin was evaluated inside the workflow task
// (docs/manifests.md, execution: inline), its result recorded as a marker.
const PathInline = "inline"

// InlineFunc evaluates an inline step on the worker running the workflow
// (activities.Inline): ok false sends it to the local activity instead.
type InlineFunc func(wfapi.RunToolInput) (wfapi.RunToolResult, bool)

// Engine is the workflows with the worker's inline evaluator; the worker
// registers its methods. The package's PlanWorkflow and ItemsWorkflow run
// every step as an activity (plan tests, unit tests).
type Engine struct {
	Inline InlineFunc
}

// PlanWorkflow is PlanWorkflow with inline steps evaluated in the workflow.
func (e Engine) PlanWorkflow(ctx workflow.Context, start wfapi.Start) (*client.Result, error) {
	return PlanWorkflow(workflow.WithValue(ctx, inlineKey{}, e.Inline), start)
}

// ItemsWorkflow is ItemsWorkflow with inline items evaluated in the workflow.
func (e Engine) ItemsWorkflow(ctx workflow.Context, in wfapi.ItemsInput) (*wfapi.ItemsResult, error) {
	return ItemsWorkflow(workflow.WithValue(ctx, inlineKey{}, e.Inline), in)
}

type inlineKey struct{}

// inlineOutcome is what the SideEffect records.
type inlineOutcome struct {
	OK     bool                `json:"ok"`
	Result wfapi.RunToolResult `json:"result"`
	// Size is the result's encoded size, what the marker holds.
	Size int `json:"size,omitempty"`
}

// inline evaluates an inline step in a SideEffect: a replay reads its
// recorded result, so the builtin's code may change between versions
// without breaking determinism. It costs microseconds and a marker, no
// task hand-off and no files. false: run it as a local activity (what it
// recorded is a decline, or the worker has no evaluator).
func (s *executor) inline(ctx workflow.Context, step wfapi.ResolvedStep, in wfapi.RunToolInput, path *string) (workflow.Future, bool) {
	eval, _ := s.ctx.Value(inlineKey{}).(InlineFunc)
	if eval == nil || !s.local || !step.Local || !step.Inline || ctx.Err() != nil {
		return nil, false
	}
	var o inlineOutcome
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		res, ok := eval(in)
		size := 0
		if ok {
			raw, _ := json.Marshal(res)
			size = len(raw)
		}
		return inlineOutcome{OK: ok, Result: res, Size: size}
	}).Get(&o)
	if err != nil || !o.OK {
		return nil, false
	}
	// Its marker counts toward the task's inline budget: past it, the run
	// yields before starting more (flushLocal).
	s.inlineDone++
	s.inlineBytes += o.Size
	*path = PathInline
	f, set := workflow.NewFuture(ctx)
	set.Set(o.Result, nil)
	return f, true
}
