package plantest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/capflow/capflow/internal/agent"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/llm"
)

// finishing is an answer that calls finish with a value output takes.
func finishing(output map[string]any) llm.Response {
	if output == nil {
		output = map[string]any{"type": "object"}
	}
	b, _ := json.Marshal(generated(output))
	return llm.Response{ID: "generated", Calls: []llm.Call{{ID: "finish-generated", Name: agent.Finish, Arguments: string(b)}}}
}

// model stands in for an agent step's provider: the case's answers for
// the step, in order (given: {STEP: {model: [...]}}).
func (t *tools) model(step string, round int) llm.Client {
	return scripted{t: t, step: step, round: round}
}

type scripted struct {
	t     *tools
	step  string
	round int
}

func (s scripted) Complete(context.Context, llm.Request) (llm.Response, error) {
	answers := s.t.c.Steps[s.step].Model
	if s.round > len(answers) {
		return llm.Response{}, &llm.Error{Err: caperr.New(caperr.InvalidInput,
			"the case gives %s's model %d answer(s); round %d asked for another (given: {%s: {model: [...]}})", s.step, len(answers), s.round, s.step)}
	}
	res := answers[s.round-1]
	res.Model = "plan-test"
	res.Raw = fmt.Sprintf("answer %d of the case", s.round)
	return res, nil
}
