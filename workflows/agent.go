package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
	"github.com/capflow/capflow/workflows/agentrun"
)

// agentTool is the tool an agent step's envelope names.
const agentTool = "capflow-agent"

// execAgent runs an agent step as its child run (workflows/agentrun),
// its goal evaluated. A person's retry after a breach starts it again
// with a round granted per retry: the rounds before reuse their recorded
// answers.
func (s *scheduler) execAgent(st *stepState, with map[string]any, spilled *wfapi.Blob) {
	step := st.step
	goal, _ := with[wfapi.AgentGoal].(string)
	if spilled != nil || goal == "" {
		s.endAgent(st, nil, caperr.New(caperr.InvalidInput, "the goal of agent step %s is empty or too large to travel (%d KB at most): pass a file's path in it", step.ID, wfapi.MaxInputBytes>>10))
		return
	}
	childID := s.workflowID + "." + step.ID
	cctx, cancel := workflow.WithCancel(workflow.WithChildOptions(s.stepCtx(step.ID), workflow.ChildWorkflowOptions{
		WorkflowID:    childID,
		StaticSummary: fmt.Sprintf("agent step %s of %s: %s", step.ID, s.rr.Plan, step.Agent.Model),
	}))
	st.cancel = cancel
	// Named at once, and marked an agent's: status reads the child's
	// rounds while it runs (and queries no other step's child).
	st.child, st.agent = &wfapi.ChildRun{WorkflowID: childID}, &wire.AgentRun{Rounds: []wire.AgentRound{}}
	in := wfapi.AgentInput{Run: s.workflowID, Step: step.ID, Goal: goal, Agent: *step.Agent, Lineage: s.lineage, Grant: st.retries, Resume: st.agentAt}
	if s.reuse != nil && !s.noReuse[step.ID] {
		// A rerun reuses its recorded answers; --from this step (or one
		// before it) asks again.
		in.ReuseFrom = s.reuse.WorkflowID
	}
	f := workflow.ExecuteChildWorkflow(cctx, wfapi.AgentWorkflowType, in)
	id := step.ID
	s.sel.AddFuture(f, func(f workflow.Future) {
		var res wfapi.AgentResult
		err := f.Get(s.ctx, &res)
		s.endAgent(s.steps[id], &res, err)
	})
}

// endAgent records an agent step's end: its data is finish's arguments;
// a breach waits for a person (asks) like on_failure: ask.
func (s *scheduler) endAgent(st *stepState, res *wfapi.AgentResult, err error) {
	s.inflight--
	st.attempts = 1
	run := wire.AgentRun{Rounds: []wire.AgentRound{}}
	if res != nil {
		run, st.agentAt = res.AgentRun, res.Resume
	}
	st.agent = &run
	switch {
	case err == nil && res.Code == "":
		ts := envelope.Timestamp(workflow.Now(s.ctx))
		msg := "agent " + res.Message
		st.env = &envelope.Envelope{ToolID: agentTool, Success: true, Timestamp: ts, Message: msg, Data: res.Data,
			Feedback: []envelope.Feedback{{Phase: "agent", Level: envelope.LevelInfo, Message: msg, Timestamp: ts}}}
		s.m.Succeed(st.step.ID)
	case s.stopped():
		st.env = s.synthEnvelope(agentTool, caperr.Cancelled, "cancelled: "+s.stopReason())
		s.m.Cancel(st.step.ID, s.stopReason())
	case err != nil:
		code, msg := agentrun.Failure(err)
		msg = "the agent's run failed: " + msg
		st.env = s.synthEnvelope(agentTool, code, msg)
		s.fail(st, msg)
	default:
		msg := res.Message
		if res.Breach != "" {
			msg += "; retry grants one more round"
		}
		st.env = s.synthEnvelope(agentTool, caperr.Code(res.Code), msg)
		if len(res.Problems) > 0 {
			st.env.Data = map[string]any{"problems": res.Problems}
		}
		if s.asks(st) {
			s.awaitDecision(st)
			return
		}
		s.fail(st, msg)
	}
}

// agentBreach reports whether st stopped at a budget: it waits for a
// person whatever its on_failure says.
func agentBreach(st *stepState) bool {
	return st.agent != nil && st.agent.Breach != ""
}
