package agent

import (
	"encoding/json"
	"fmt"

	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/wire"
)

// Answered is the conversation after answer res, compiled as p: the
// model's calls and, for a refused proposal, each call's refusal (and
// "not run" for the calls refused with it). An answer refused whole is
// left out (its calls may be thousands, each needing an answer) and a
// user message says why.
func Answered(conv []llm.Message, res llm.Response, p Proposal) []llm.Message {
	if p.Whole != "" {
		return append(conv, llm.Message{Role: llm.RoleUser, Content: "refused: " + p.Whole})
	}
	conv = append(conv, llm.Message{Role: llm.RoleAssistant, Content: res.Text, Calls: res.Calls})
	if !p.Refused() {
		return conv
	}
	for _, c := range p.Calls {
		body := map[string]any{"refused": c.Refused}
		if len(c.Refused) == 0 {
			body = map[string]any{"not_run": "another call of this proposal was refused, so none ran: propose it again"}
		}
		conv = append(conv, toolMessage(c.ID, body))
	}
	return conv
}

// Results are the tool messages of a round that ran, in the calls'
// order: each call's data (cut at MaxDataBytes), or its error, or why it
// did not run.
func Results(calls []Call, steps []wire.StepResult) []llm.Message {
	byID := map[string]wire.StepResult{}
	for _, s := range steps {
		byID[s.ID] = s
	}
	out := make([]llm.Message, 0, len(calls))
	for _, c := range calls {
		out = append(out, toolMessage(c.ID, resultOf(byID[c.Step])))
	}
	return out
}

func resultOf(s wire.StepResult) map[string]any {
	env := s.Envelope
	switch {
	case s.Status == wire.StepSucceeded && env != nil:
		return map[string]any{"data": env.Data}
	case s.Status == wire.StepSucceeded:
		return map[string]any{"data_file": s.DataFile}
	case env != nil && env.Error != nil:
		return map[string]any{"error": map[string]any{"code": env.Error.Code, "message": env.Message}}
	case s.Status == "":
		return map[string]any{"not_run": "no result"}
	}
	return map[string]any{"not_run": fmt.Sprintf("%s: %s", s.Status, s.Reason)}
}

// toolMessage is a call's tool message, its JSON cut at MaxDataBytes.
func toolMessage(id string, body map[string]any) llm.Message {
	b, _ := json.Marshal(body)
	text := string(b)
	if len(text) > MaxDataBytes {
		text = fmt.Sprintf(`{"cut":"the result is %d KB; its first %d KB follow","text":%q}`, len(b)>>10, MaxDataBytes>>10, text[:MaxDataBytes])
	}
	return llm.Message{Role: llm.RoleTool, CallID: id, Content: text}
}
