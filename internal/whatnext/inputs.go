package whatnext

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/wire"
)

// With gives a step's inputs as its plan writes them (its with), nil
// where unknown: what Finalize knows, so a refused input's advice names
// where the input came from rather than every place it could have.
type With func(stepID string) map[string]any

// OfWith is Of, with the advice on a step whose input was refused
// (INVALID_INPUT, or its tool's input_schema) told where its inputs come
// from.
func OfWith(r *wire.Result, with With) []wire.Next {
	out := Of(r)
	if with == nil || !r.Status.Ended() {
		return out
	}
	for i, n := range out {
		s := stepOf(r, n.Step)
		w := with(n.Step)
		if s == nil || w == nil || !refusedInput(*s) {
			continue
		}
		if cmd, advice := inputAdvice(r.WorkflowID, s.Envelope.Message, w); advice != "" {
			out[i].Command, out[i].Advice = cmd, advice
		}
	}
	return out
}

func stepOf(r *wire.Result, id string) *wire.StepResult {
	for i := range r.Steps {
		if r.Steps[i].ID == id && id != "" {
			return &r.Steps[i]
		}
	}
	return nil
}

// refusedInput: the step failed on what it was given, not on its work.
func refusedInput(s wire.StepResult) bool {
	if s.Agent != nil || s.Envelope == nil {
		return false
	}
	switch causeOf(s) {
	case caperr.InvalidInput:
		return true
	case caperr.SchemaViolation:
		return strings.HasPrefix(s.Envelope.Message, "inputs for ")
	}
	return false
}

// inputAdvice says, for the inputs the message names (all of them where
// it names none), where each came from and how to fix it there: in the
// plan, a run input (a rerun replays both as they were), or an earlier
// step's output (a rerun from that step, once it or its tool is fixed);
// "" for a step with no inputs of its own.
func inputAdvice(workflowID, msg string, with map[string]any) (command, advice string) {
	keys := named(msg, with)
	var written, producers []string
	runInputs := map[string]bool{}
	for _, k := range keys {
		literal := true // no reference at all (an item's, a secret's: neither)
		plan.CollectRefs(with[k], nil, func(_ []string, tpl plan.Template, _ error) {
			for _, ref := range tpl.Refs() {
				literal = false
				switch {
				case ref.Kind == plan.RefInputs:
					runInputs[ref.Name] = true
				case ref.Kind == plan.RefSteps && !slices.Contains(producers, ref.Name):
					producers = append(producers, ref.Name)
				}
			}
		})
		if literal {
			written = append(written, "with."+k)
		}
	}
	var parts []string
	if len(written) > 0 {
		parts = append(parts, fmt.Sprintf("%s is written in the plan: fix it there (or the file it names), then capflow run PLAN again (a rerun replays the plan it was given)", strings.Join(written, ", ")))
	}
	if names := slices.Sorted(maps.Keys(runInputs)); len(names) > 0 {
		parts = append(parts, fmt.Sprintf("it comes from the run's input %s: capflow run PLAN --input %s=VALUE with a value that fits (a rerun replays the inputs it was given)", strings.Join(names, ", "), names[0]))
	}
	if len(producers) > 0 {
		command = fmt.Sprintf("capflow rerun %s --from %s", workflowID, producers[0])
		parts = append(parts, fmt.Sprintf("it comes from step %s's output: fix that step or its tool, then the command above runs it again", strings.Join(producers, ", ")))
	}
	if len(parts) == 0 {
		return "", "" // a step with no inputs of its own: Of's advice stands
	}
	return command, "the message names the input; " + strings.Join(parts, "; ")
}

// named is the inputs msg names (with.K, "K", or K: at its start), in
// order; all of them where it names none.
func named(msg string, with map[string]any) []string {
	all := slices.Sorted(maps.Keys(with))
	var out []string
	for _, k := range all {
		if regexp.MustCompile(`(^|with\.|[\s"'(])` + regexp.QuoteMeta(k) + `($|["':.,\s)\[])`).MatchString(msg) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}
