package client

import (
	"context"
	"fmt"
	"strings"
)

// agentRounds adds to each running agent step its rounds so far (its
// child run's answer) and, when its round waits at a gate for a person,
// that wait: the step shows waiting, and a decision on it goes to the
// gate (DecideOnce).
func (r *Run) agentRounds(ctx context.Context, res *Result) {
	for i := range res.Steps {
		s := &res.Steps[i]
		if s.Status != StepRunning || s.Child == nil || s.Agent == nil {
			continue // not an agent step's running child
		}
		v, err := r.c.tc.QueryWorkflow(ctx, s.Child.WorkflowID, "", AgentQuery)
		if err != nil {
			continue // a sub-plan's child, or a run not answering
		}
		var a struct{ AgentRun }
		if v.Get(&a) != nil {
			continue
		}
		s.Agent = &a.AgentRun
		if n := len(a.Rounds); n > 0 && a.Rounds[n-1].Approval != "" && a.Rounds[n-1].SubRun != "" {
			r.gateOf(ctx, s, a.Rounds[n-1])
		}
	}
}

// gateOf makes s wait at its round's gate, when the gate waits.
func (r *Run) gateOf(ctx context.Context, s *StepResult, rd AgentRound) {
	sub, err := r.c.Get(rd.SubRun).Progress(ctx)
	if err != nil {
		return
	}
	for _, g := range sub.Steps {
		if g.Status == StepWaiting && g.Waiting != nil {
			w := *g.Waiting
			w.Run, w.Step, w.Proposal = rd.SubRun, g.ID, rd.Approval
			w.Prompt = fmt.Sprintf("round %d: %s", rd.Round, w.Prompt)
			s.Status, s.Waiting = StepWaiting, &w
			return
		}
	}
}

// waitOf is the wait step is in now (nil when it does not wait).
func waitOf(p *Result, step string) *Wait {
	for _, s := range p.Steps {
		if s.ID == step && s.Status == StepWaiting {
			return s.Waiting
		}
	}
	return nil
}

// decideGate answers an agent step's round at its gate, when the decision
// names the proposal the gate shows (a prefix of its digest): one meant
// for an earlier proposal, sent again or late, decides nothing.
func (r *Run) decideGate(ctx context.Context, w *Wait, req DecideRequest) (*ControlAnswer, error) {
	short := w.Proposal[:min(16, len(w.Proposal))]
	if err := req.Check(); err != nil {
		return nil, &Refused{Reason: err.Error()}
	}
	switch {
	case req.Proposal == "":
		return nil, &Refused{Reason: fmt.Sprintf("step %s waits at an agent round's gate for proposal sha256:%s…: name it (--proposal %s; the prompt lists its calls)", req.Step, short, short)}
	case !strings.HasPrefix(w.Proposal, req.Proposal):
		return nil, &Refused{Reason: fmt.Sprintf("step %s's gate waits for proposal sha256:%s…, not %s…: nothing decided (a decision is for the proposal it names)", req.Step, short, req.Proposal)}
	}
	req.Step, req.Proposal = w.Step, ""
	return r.c.Get(w.Run).DecideOnce(ctx, req)
}
