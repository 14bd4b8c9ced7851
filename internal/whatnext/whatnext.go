// Package whatnext says what a person can do about a run that did not
// pass: for each step that failed or waits after a failure, its code and
// severity, the last lines of its stderr, the command that continues the
// run and, once its retries ran out, advice from its code. The CLI, the
// report, MCP and the console all show this one answer.
package whatnext

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/wire"
)

// StderrLines is how many of a tool's last stderr lines a Next carries.
const StderrLines = 5

// Of is what to do next about r, the steps that need it first in the
// plan's order; nil for a run that passed or still runs without trouble.
func Of(r *wire.Result) []wire.Next {
	if r.Status == wire.StatusPassed {
		// A failure its join or failure policy absorbed (a quorum met
		// without it) is in the run's table, not something to do.
		return nil
	}
	var out []wire.Next
	for _, s := range r.Steps {
		if n, ok := ofStep(r, s); ok {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		if n, ok := ofRun(r); ok {
			out = append(out, n)
		}
	}
	return out
}

// For is what to do next about r: the Next an ended run carries (Finalize
// made it from every step, before a large result left steps or their
// envelopes out), else Of's.
func For(r *wire.Result) []wire.Next {
	if r.Status.Ended() && len(r.Next) > 0 {
		return r.Next
	}
	return Of(r)
}

// ofStep: a step that failed in an ended run is run again with rerun
// --from; one that waits after a failure takes retry (or skip, fail).
func ofStep(r *wire.Result, s wire.StepResult) (wire.Next, bool) {
	waits := s.Status == wire.StepWaiting && s.Waiting != nil && s.Waiting.Kind == wire.WaitDecision
	if s.Status != wire.StepFailed && !waits {
		return wire.Next{}, false
	}
	n := wire.Next{Step: s.ID, Stderr: StderrTail(s)}
	code := causeOf(s)
	if e := s.Envelope; e != nil && e.Error != nil {
		n.Code, n.Severity = e.Error.Code, e.Error.Severity
	}
	if n.Severity == "" && n.Code != "" {
		n.Severity = caperr.Lookup(n.Code).Severity
	}
	switch {
	case waits:
		n.Command = fmt.Sprintf("capflow retry %s %s", r.WorkflowID, s.ID)
		n.Advice = "the step waits for a decision: retry runs it again, skip absorbs its failure, fail ends it"
		if a := caperr.Advice(code); a != "" {
			n.Advice = a + "; then " + n.Advice
		}
	case r.Status.Ended():
		n.Command = fmt.Sprintf("capflow rerun %s --from %s", r.WorkflowID, s.ID)
		n.Advice = caperr.Advice(code)
	default:
		return wire.Next{}, false // the run goes on: nothing to do yet
	}
	if s.Agent != nil {
		n.Advice = agentAdvice(code, s, waits)
	}
	if len(n.Stderr) == 0 {
		n.Advice = withoutTail(n.Advice)
	}
	n.Advice = filled(n.Advice, r, s)
	return n, true
}

// Cause is the code behind a failed run: its first failed step's, or the
// code that one summarises (RETRY_EXHAUSTED's last attempt's); "" when no
// failed step has one.
func Cause(r *wire.Result) caperr.Code {
	for _, s := range r.Steps {
		if c := causeOf(s); s.Status == wire.StepFailed && c != "" {
			return c
		}
	}
	// A large result left the failed steps' envelopes out: the Next the
	// run carries was made from them.
	for _, n := range r.Next {
		if n.Code != "" {
			return caperr.Code(n.Code)
		}
	}
	return ""
}

// Final reports whether the run's first failed step failed for good: its
// tool's TOOL_FAILURE marked retryable: false, or a code capflow does not
// know. Running the run again meets it again.
func Final(r *wire.Result) bool {
	for _, s := range r.Steps {
		if s.Status == wire.StepFailed && s.Envelope != nil && s.Envelope.Error != nil {
			e := s.Envelope.Error
			return e.Code == wire.ErrorCode(caperr.ToolFailure) && !e.Retryable
		}
	}
	return false
}

// causeOf is a step's error code, or the one it summarises.
func causeOf(s wire.StepResult) caperr.Code {
	e := s.Envelope
	switch {
	case e == nil || e.Error == nil:
		return ""
	case e.Error.Cause != "":
		return caperr.Code(e.Error.Cause)
	}
	return caperr.Code(e.Error.Code)
}

// agentAdvice is what to do about an agent step that stopped (agents.md):
// its rounds say why, not a tool's stderr.
func agentAdvice(code caperr.Code, s wire.StepResult, waits bool) string {
	switch {
	case s.Agent.Breach != "":
		return "its budget stopped it before a call (" + s.Agent.Breach + "): retry grants one more round and each budget's share of one; skip or fail end it"
	case code == caperr.InvalidInput:
		return "every proposal in a row was refused: the report's Agent rounds list each problem; sharpen the goal or widen the scope"
	case code == caperr.ResourceExhausted:
		return "the model did not finish within max_rounds: read its rounds (capflow status, the report), sharpen the goal or raise max_rounds"
	case code == caperr.DependencyUnavailable || code == caperr.TaskTimeout:
		return "the model's server did not answer: check that it runs and capflow.yaml's llm base_url (the message names the provider)"
	case waits:
		return "retry runs it again from where it stopped; skip absorbs its failure, fail ends it"
	}
	return caperr.Advice(code)
}

// noTail rewrites advice that sends a person to a stderr tail the step
// does not have (its tool wrote no plain line there, or has no stderr: an
// HTTP, MCP or builtin tool).
var noTail = strings.NewReplacer(
	"read the stderr tail; ", "there is no stderr tail to show (the step's feedback and its folder may say more); ",
	"in the stderr tail and the step's feedback", "in the step's feedback")

func withoutTail(advice string) string { return noTail.Replace(advice) }

// filled names in advice the step's tool (TOOL) and the input it was
// given (FILE: its records' input.json, once the run has a folder).
func filled(advice string, r *wire.Result, s wire.StepResult) string {
	if s.Tool != "" {
		advice = strings.ReplaceAll(advice, "TOOL", s.Tool)
	}
	if r.Report.JSON != "" && s.ID != "" {
		advice = strings.ReplaceAll(advice, "FILE", filepath.Join(runfolder.Records(filepath.Dir(r.Report.JSON), s.ID, -1), "input.json"))
	}
	return advice
}

// ofRun: a run that failed with no step to blame (a plan refused, a run
// cancelled) says what to do with the whole of it.
func ofRun(r *wire.Result) (wire.Next, bool) {
	switch r.Status {
	case wire.StatusInvalid:
		return wire.Next{Code: wire.ErrorCode(caperr.InvalidInput), Advice: "fix the plan's problems (each names its file, line and field); capflow plan check PLAN shows them all before anything runs"}, true
	case wire.StatusBlockedByPolicy:
		return wire.Next{Code: wire.ErrorCode(caperr.PolicyBlocked), Advice: caperr.Advice(caperr.PolicyBlocked)}, true
	case wire.StatusPartialComplete:
		return ofGaps(r.Gaps), true
	case wire.StatusCancelled:
		return wire.Next{Code: wire.ErrorCode(caperr.Cancelled), Command: "capflow rerun " + r.WorkflowID, Advice: caperr.Advice(caperr.Cancelled)}, true
	}
	return wire.Next{}, false
}

// ofGaps: gaps a new tool can fill are scaffolded; where every gap is a
// step whose inputs do not fit what takes them (its capability's tool, a
// sub-plan), the step is what to fix: a new tool would take the
// capability from that one for every plan of the project.
func ofGaps(gaps []wire.Gap) wire.Next {
	next := wire.Next{Code: wire.ErrorCode(caperr.ToolNotFound), Advice: "a step's inputs do not fit what takes them (its tool, a sub-plan): capflow plan check PLAN names each mismatch; fix the step or what feeds it"}
	for _, g := range gaps {
		if g.Reason != wire.GapSchemaIncompatible {
			next.Advice = "no tool provides the gaps' capabilities: capflow plan check PLAN --output-path GAPS.json, then capflow tools scaffold --from-gaps GAPS.json"
		}
	}
	for _, g := range gaps {
		if g.Reason == wire.GapDependencyUnavailable {
			// The tool is there; what it needs is not, where the run resolved.
			return wire.Next{Code: wire.ErrorCode(caperr.DependencyUnavailable), Advice: fmt.Sprintf("%s: give it to the worker (an environment variable takes the worker's restart), then run again", g.ReasonMessage)}
		}
	}
	for _, g := range gaps {
		if files := g.LeftOut(); len(files) > 0 {
			// A broken manifest first: scaffolding beside it makes a second tool.
			next.Command = "capflow tools validate"
			next.Advice = fmt.Sprintf("%s declares %s but is left out for its problems: capflow tools validate names them; fix it, then check the plan again", strings.Join(files, ", "), g.MissingCapability)
			break
		}
	}
	if len(gaps) == 0 {
		next.Advice = "no plan covers the request: capflow route REQUEST shows what the router made of it, capflow tools list what the project can do"
	}
	return next
}

// StderrTail is the last lines a failed step's tool wrote to stderr (its
// envelope's stderr feedback), at most StderrLines.
func StderrTail(s wire.StepResult) []string {
	if s.Envelope == nil || (s.Status != wire.StepFailed && s.Status != wire.StepWaiting) {
		return nil
	}
	for _, f := range s.Envelope.Feedback {
		if f.Phase == "stderr" && f.Detail != "" {
			lines := strings.Split(strings.TrimRight(f.Detail, "\n"), "\n")
			return lines[max(len(lines)-StderrLines, 0):]
		}
	}
	return nil
}
