// Package agentrun is the workflow of an agent step (docs/agents.md): a
// child of its run that, round after round, asks the AgentTurn activity
// for the model's next proposal (compiled there by the checks of `plan
// check`), runs an accepted one as a sub-plan of ordinary steps and sends
// the results back, until the model finishes, a budget or max_rounds
// stops it, or max_repairs refused proposals in a row fail it. History
// keeps digests, the model, tokens and cost: never the conversation.
package agentrun

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/agent"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// turnOptions bound one model call: its provider's timeout is within,
// and a turn retried after its answer was recorded reuses it.
var turnOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 5 * time.Minute,
	HeartbeatTimeout:    10 * time.Second, // the turn beats every 2 s while its model answers
	// A busy or failing model server gets 1+2+4+8 s to come back.
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
}

type run struct {
	in  wfapi.AgentInput
	res *wfapi.AgentResult
	// grant: rounds a person granted after a breach (the parent's retries).
	grant int
}

// Workflow runs one agent step.
func Workflow(ctx workflow.Context, in wfapi.AgentInput) (*wfapi.AgentResult, error) {
	// Only a run starts an agent step, as its child named RUN.STEP: a
	// client starting this workflow type itself could name any scope.
	info := workflow.GetInfo(ctx)
	if p := info.ParentWorkflowExecution; p == nil || p.ID != in.Run || info.WorkflowExecution.ID != in.Run+"."+in.Step {
		return nil, temporal.NewNonRetryableApplicationError("an agent step runs only as the child of its run, named RUN.STEP", string(caperr.InvalidInput), nil)
	}
	r := &run{in: in, res: &wfapi.AgentResult{}, grant: in.Grant}
	r.res.Rounds = []wire.AgentRound{}
	at := wfapi.AgentResume{Round: 1}
	if rs := in.Resume; rs != nil {
		// A person's retry: the conversation goes on where it stopped.
		at, r.res.AgentRun = *rs, rs.Run
		r.res.Breach = ""
	}
	if err := workflow.SetQueryHandler(ctx, wfapi.AgentQuery, func() (*wfapi.AgentResult, error) { return r.res, nil }); err != nil {
		return nil, err
	}
	return r.loop(ctx, at)
}

// loop runs rounds from at until the model finishes or the step stops; a
// stop leaves where it stopped (Resume) for a person's retry.
func (r *run) loop(ctx workflow.Context, at wfapi.AgentResume) (*wfapi.AgentResult, error) {
	repairs := 0
	for ; at.Round <= r.in.Agent.MaxRounds+r.grant; at.Round++ {
		t, err := r.turn(ctx, at)
		if err != nil {
			// The model call failed on every try: the step fails with its
			// code, keeping its rounds, and a retry goes on from here.
			code, msg := Failure(err)
			if caperr.Lookup(code).Retryable {
				r.res.Spent.LLMCalls += int(turnOptions.RetryPolicy.MaximumAttempts) // each try reached the endpoint, and may be billed
			}
			return r.stop(at, code, fmt.Sprintf("round %d: the model call failed: %s", at.Round, msg), ""), nil
		}
		if t.Breach != "" {
			return r.stop(at, caperr.ResourceExhausted, fmt.Sprintf("stopped before round %d: its call could pass the budget (%s)", at.Round, t.Breach), t.Breach), nil
		}
		rd := r.record(at.Round, t)
		at.Conversation, at.Results = t.Conversation, nil
		switch p := t.Proposal; {
		case p.Finished || p.Finish != nil: // runs recorded before Finished carry Finish alone
			rd.Finished = true
			r.res.Data = p.Finish
			r.res.Message = fmt.Sprintf("finished in round %d (%d model call(s), %d tokens, $%.4f)", at.Round, r.res.Spent.LLMCalls, r.res.Spent.Tokens, r.res.Spent.USD)
			return r.res, nil
		case p.Refused():
			repairs++
			r.res.Problems = append(r.res.Problems, prefixed(at.Round, p.Problems())...)
			if repairs > *r.in.Agent.MaxRepairs {
				at.Round++
				return r.stop(at, caperr.InvalidInput, fmt.Sprintf("%d proposal(s) in a row refused (max_repairs %d): %s", repairs, *r.in.Agent.MaxRepairs, r.res.Problems[len(r.res.Problems)-1]), ""), nil
			}
		default:
			repairs = 0
			if at.Results, err = r.runCalls(ctx, at.Round, rd, p); err != nil {
				return nil, err
			}
		}
	}
	return r.stop(at, caperr.ResourceExhausted, fmt.Sprintf("max_rounds %d reached and the model did not finish", r.in.Agent.MaxRounds+r.grant), ""), nil
}

// turn is one model call, its answer compiled.
func (r *run) turn(ctx workflow.Context, at wfapi.AgentResume) (*wfapi.TurnResult, error) {
	o := turnOptions
	o.ActivityID = fmt.Sprintf("turn-%d", at.Round)
	o.Summary = fmt.Sprintf("%s · round %d: ask %s", r.in.Step, at.Round, r.in.Agent.Model)
	in := wfapi.TurnInput{Round: at.Round, Conversation: at.Conversation, Results: at.Results, Spent: r.res.Spent, Grant: r.grant}
	if at.Conversation == "" {
		in.Setup = &r.in // stored with the conversation: later rounds name it
	}
	var t wfapi.TurnResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), wfapi.AgentTurnActivity, in).Get(ctx, &t)
	return &t, err
}

// record adds a round and what it spent.
func (r *run) record(round int, t *wfapi.TurnResult) *wire.AgentRound {
	r.res.Spent.LLMCalls += max(1, t.Calls) // its failed tries cost too
	r.res.Spent.Tokens += t.Usage.InputTokens + t.Usage.OutputTokens
	r.res.Spent.USD += t.USD
	// Pure: JSON of the calls' arguments (encoding/json sorts map keys).
	//workflowcheck:ignore
	lines := agent.Lines(t.Proposal.Calls)
	rd := wire.AgentRound{Round: round, Request: t.Request, Response: t.Response, CallID: t.CallID, Model: t.Model,
		InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens, USD: t.USD, Reused: t.Reused,
		Calls: lines, Refused: t.Proposal.Problems()}
	if a := t.Proposal.Approval; a != nil {
		rd.Approval = a.Digest
	}
	r.res.Rounds = append(r.res.Rounds, rd)
	return &r.res.Rounds[len(r.res.Rounds)-1]
}

// runCalls runs an accepted proposal as a sub-plan (its own run: its
// checks again, retries, timeouts, confinement, an approval when one is
// asked) and answers each call with its result.
func (r *run) runCalls(ctx workflow.Context, round int, rd *wire.AgentRound, p agent.Proposal) ([]llm.Message, error) {
	// Built here from the calls Compile checked (history keeps the calls,
	// not their plan twice).
	// Pure: maps built from the calls and JSON with sorted keys.
	//workflowcheck:ignore
	agent.Runnable(&p, agent.Options{Run: r.in.Run, Step: r.in.Step, Round: round, Policy: r.in.Agent.Policy})
	id := fmt.Sprintf("%s.round-%d", workflow.GetInfo(ctx).WorkflowExecution.ID, round)
	rd.SubRun = id
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id,
		StaticSummary: fmt.Sprintf("agent %s, round %d: %d call(s)", r.in.Step, round, len(p.Calls))})
	var res wfapi.Result
	if err := workflow.ExecuteChildWorkflow(cctx, wfapi.WorkflowType, wfapi.Start{Input: wfapi.Input{Plan: p.Plan}, Lineage: r.in.Lineage, Brief: true}).Get(ctx, &res); err != nil {
		return nil, err
	}
	// Pure: each call's outcome as JSON (sorted keys).
	//workflowcheck:ignore
	return agent.Results(p.Calls, res.Steps), nil
}

// stop is the step's failure as a result (a failed step, not a failed
// workflow: its code is the step's), and where a retry goes on from.
func (r *run) stop(at wfapi.AgentResume, code caperr.Code, msg, breach string) *wfapi.AgentResult {
	r.res.Code, r.res.Message, r.res.Breach = wire.ErrorCode(code), msg, breach
	at.Run = r.res.AgentRun
	r.res.Resume = &at
	return r.res
}

func prefixed(round int, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprintf("round %d: %s", round, strings.TrimSpace(l))
	}
	return out
}

// Failure is a failed activity's or child's contract code and its own
// message, without the layers of Temporal errors it came through.
func Failure(err error) (caperr.Code, string) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && caperr.Known(caperr.Code(app.Type())) {
		return caperr.Code(app.Type()), app.Message()
	}
	if temporal.IsCanceledError(err) {
		return caperr.Cancelled, "cancelled"
	}
	return caperr.ToolFailure, err.Error()
}
