package report

import (
	"fmt"
	"strings"

	"github.com/capflow/capflow/internal/wfapi"
)

// agentSection lists each agent step's rounds: the model call (digests of
// its request and answer in the artifact store), what it proposed, what
// was refused, the approval and the sub-run its calls ran as, and what
// the step spent (docs/agents.md).
func agentSection(steps []wfapi.StepResult) string {
	var b strings.Builder
	for _, s := range steps {
		a := s.Agent
		if a == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n## Agent rounds\n")
		}
		fmt.Fprintf(&b, "\n### %s\n\n%d model call(s), %d tokens, $%.4f", s.ID, a.Spent.LLMCalls, a.Spent.Tokens, a.Spent.USD)
		if a.Breach != "" {
			fmt.Fprintf(&b, "; stopped at its budget: %s", a.Breach)
		}
		b.WriteString("\n\n| round | model | tokens in/out | cost | proposal | outcome |\n|---|---|---|---|---|---|\n")
		for _, rd := range a.Rounds {
			fmt.Fprintf(&b, "| %d | %s | %d/%d | $%.4f | %s | %s |\n", rd.Round, cell(rd.Model), rd.InputTokens, rd.OutputTokens, rd.USD,
				cell(strings.Join(rd.Calls, "; ")), cell(roundOutcome(rd)))
		}
	}
	return b.String()
}

func roundOutcome(rd wfapi.AgentRound) string {
	var parts []string
	switch {
	case rd.Breach != "":
		parts = append(parts, "no call: it could pass the budget ("+rd.Breach+")")
	case rd.Finished:
		parts = append(parts, "finished")
	case len(rd.Refused) > 0:
		parts = append(parts, "refused, nothing ran: "+strings.Join(rd.Refused, "; "))
	case rd.SubRun != "":
		parts = append(parts, "ran as `"+rd.SubRun+"`")
	}
	if rd.Approval != "" {
		parts = append(parts, "approval of sha256:"+rd.Approval[:16])
	}
	if rd.Reused {
		parts = append(parts, "answer reused (identical request)")
	}
	if rd.Request != "" {
		parts = append(parts, "request sha256:"+rd.Request[:12]+", answer sha256:"+rd.Response[:min(12, len(rd.Response))])
	}
	return strings.Join(parts, " — ")
}
