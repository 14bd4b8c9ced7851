package whatnext

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
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
		if cmd, advice := inputAdvice(r, s.Envelope.Message, w); advice != "" {
			out[i].Command, out[i].Advice = cmd, advice
		}
	}
	return out
}

func stepIndex(r *wire.Result, id string) int {
	return slices.IndexFunc(r.Steps, func(s wire.StepResult) bool { return s.ID == id })
}

func stepOf(r *wire.Result, id string) *wire.StepResult {
	if i := stepIndex(r, id); i >= 0 && id != "" {
		return &r.Steps[i]
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
		return strings.HasPrefix(s.Envelope.Message, caperr.InputsRefused)
	}
	return false
}

// inputAdvice says, for the inputs the message names (all of them where
// it names none), where each came from and how to fix it there: in the
// plan, a run input (a rerun replays both as they were), or an earlier
// step's output (a rerun from that step, once it or its tool is fixed);
// "" for a step with no inputs of its own.
func inputAdvice(r *wire.Result, msg string, with map[string]any) (command, advice string) {
	keys := named(msg, with)
	var written, producers []string
	runInputs := map[string]bool{}
	for _, k := range keys {
		literal := true // no reference at all (an item's, a secret's: neither)
		plan.CollectRefs(with[k], nil, func(_ []string, tpl plan.Template, _ error) {
			if len(tpl.Refs()) > 0 && !tpl.IsSingleRef() {
				written = append(written, "with."+k) // text around a reference ("${inputs.dir}/x.md")
			}
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
		verb := "is"
		if len(written) > 1 {
			verb = "are"
		}
		parts = append(parts, fmt.Sprintf("%s %s written in the plan: fix it there (or the file it names), then capflow run PLAN again (a rerun replays the plan it was given)", strings.Join(written, ", "), verb))
	}
	if names := slices.Sorted(maps.Keys(runInputs)); len(names) > 0 {
		parts = append(parts, fmt.Sprintf("it comes from the run's input %s: capflow run PLAN --input %s=VALUE with a value that fits (a rerun replays the inputs it was given)", quoted(names), names[0]))
	}
	if len(producers) > 0 {
		// The earliest in the plan (its result's order): a rerun from it
		// runs the others again too.
		slices.SortFunc(producers, func(a, b string) int { return stepIndex(r, a) - stepIndex(r, b) })
		command = fmt.Sprintf("capflow rerun %s --from %s", r.WorkflowID, producers[0])
		from := fmt.Sprintf("step %s's output", producers[0])
		if len(producers) > 1 {
			from = fmt.Sprintf("steps %s' outputs", strings.Join(producers, ", "))
		}
		parts = append(parts, fmt.Sprintf("it comes from %s: where that step's with is at fault, fix it in the plan and capflow run PLAN again (a rerun replays the plan); where its tool is, fix the tool and the command above runs it again", from))
	}
	if len(parts) == 0 {
		return "", "" // a step with no inputs of its own: Of's advice stands
	}
	return command, "the message names the input; " + strings.Join(parts, "; ")
}

// named is the inputs msg names, in order: with.K anywhere, "K" quoted,
// or K at the message's start (after its "inputs for TOOL: "); all of
// them where it names none. A bare word elsewhere is not a name ("cannot
// convert to number" names no input "to").
func named(msg string, with map[string]any) []string {
	all := slices.Sorted(maps.Keys(with))
	start := msg
	if rest, ok := strings.CutPrefix(msg, caperr.InputsRefused); ok {
		if _, after, found := strings.Cut(rest, ": "); found {
			start = after
		}
	}
	var out []string
	for _, k := range all {
		if k != "" && (wordAt(msg, "with."+k) || strings.Contains(msg, `"`+k+`"`) || wordStarts(start, k)) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

// wordAt reports whether s holds w not followed by a name's character.
func wordAt(s, w string) bool {
	for i := strings.Index(s, w); i >= 0; {
		if end := i + len(w); end == len(s) || !nameChar(s[end]) {
			return true
		}
		next := strings.Index(s[i+1:], w)
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

// wordStarts reports whether s starts with the word w.
func wordStarts(s, w string) bool {
	return strings.HasPrefix(s, w) && (len(s) == len(w) || !nameChar(s[len(w)]))
}

func nameChar(b byte) bool {
	return b == '_' || b == '-' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// quoted is names, each in quotes: `"file"`, not the run's input file.
func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
