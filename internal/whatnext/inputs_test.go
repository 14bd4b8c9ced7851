package whatnext

import (
	"reflect"
	"testing"

	"github.com/capflow/capflow/wire"
)

// A refused input's advice says where that input came from, and the
// command is the one that can help: none where a rerun would replay the
// same value (the plan's, a run input), a rerun from its producer where a
// step made it (a trial followed the rerun the old advice gave, and it
// failed again the same way).
func TestARefusedInputsAdviceNamesItsSource(t *testing.T) {
	const head = "the message names the input; "
	for _, c := range []struct {
		name, code, msg string
		with            map[string]any
		command, advice string
	}{
		{"a run input", "INVALID_INPUT", `path "nope.md" does not exist`, map[string]any{"file": "${inputs.file}"},
			"", head + "it comes from the run's input \"file\": capflow run PLAN --input file=VALUE with a value that fits (a rerun replays the inputs it was given)"},
		{"written in the plan", "INVALID_INPUT", `with.path: "../x" leaves the project`, map[string]any{"path": "../x", "content": "${steps.a.data.text}"},
			"", head + "with.path is written in the plan: fix it there (or the file it names), then capflow run PLAN again (a rerun replays the plan it was given)"},
		{"an earlier step's output, in the tool's input_schema", "SCHEMA_VIOLATION", "inputs for save: content: must be string", map[string]any{"path": "out.txt", "content": "${steps.a.data.n}"},
			"capflow rerun r1 --from a", head + "it comes from step a's output: where that step's with is at fault, fix it in the plan and capflow run PLAN again (a rerun replays the plan); where its tool is, fix the tool and the command above runs it again"},
		{"a bare word is no name", "INVALID_INPUT", "cannot convert to number", map[string]any{"to": "${steps.a.data.n}", "n": "${inputs.n}"},
			"capflow rerun r1 --from a", head + "it comes from the run's input \"n\": capflow run PLAN --input n=VALUE with a value that fits (a rerun replays the inputs it was given); it comes from step a's output: where that step's with is at fault, fix it in the plan and capflow run PLAN again (a rerun replays the plan); where its tool is, fix the tool and the command above runs it again"},
		{"the earliest producer first", "INVALID_INPUT", "bad input", map[string]any{"a": "${steps.late.data}", "b": "${steps.early.data}"},
			"capflow rerun r1 --from early", head + "it comes from steps early, late' outputs: where that step's with is at fault, fix it in the plan and capflow run PLAN again (a rerun replays the plan); where its tool is, fix the tool and the command above runs it again"},
		{"named by none: every source", "INVALID_INPUT", "bad input", map[string]any{"a": "x", "b": "${inputs.n} and ${steps.p.data}"},
			"capflow rerun r1 --from p", head + "with.a, with.b are written in the plan: fix it there (or the file it names), then capflow run PLAN again (a rerun replays the plan it was given); it comes from the run's input \"n\": capflow run PLAN --input n=VALUE with a value that fits (a rerun replays the inputs it was given); it comes from step p's output: where that step's with is at fault, fix it in the plan and capflow run PLAN again (a rerun replays the plan); where its tool is, fix the tool and the command above runs it again"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := failed("s", wire.ErrorCode(c.code), "", "HIGH")
			s.Envelope.Message = c.msg
			r := wire.Result{WorkflowID: "r1", Status: wire.StatusFailed, Steps: []wire.StepResult{{ID: "early"}, {ID: "late"}, s}}
			got := OfWith(&r, func(id string) map[string]any { return map[string]map[string]any{"s": c.with}[id] })
			if len(got) != 1 || got[0].Command != c.command || got[0].Advice != c.advice {
				t.Fatalf("got %+v\nwant command %q advice %q", got, c.command, c.advice)
			}
		})
	}
	// Where the source is not known, or is neither (an item's), or the
	// failure is not about the input, Of's answer stands.
	for name, c := range map[string]struct {
		code string
		with map[string]any
	}{
		"no with":         {"INVALID_INPUT", nil},
		"an item's value": {"INVALID_INPUT", map[string]any{"path": "${item.p}"}},
		"another code":    {"TOOL_FAILURE", map[string]any{"file": "${inputs.file}"}},
		"output schema":   {"SCHEMA_VIOLATION", map[string]any{"file": "${inputs.file}"}},
	} {
		s := failed("s", wire.ErrorCode(c.code), "", "HIGH")
		s.Envelope.Message = "output of t: n: must be integer"
		r := wire.Result{WorkflowID: "r1", Status: wire.StatusFailed, Steps: []wire.StepResult{s}}
		want := Of(&r)
		if got := OfWith(&r, func(string) map[string]any { return c.with }); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
}
