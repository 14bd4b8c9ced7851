// Package report renders a run's final report: report.json (the whole
// result and resolution) and report.md (for people, with a mermaid graph
// coloured by step status). Pure functions: the Finalize activity writes.
package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

// Document is report.json.
type Document struct {
	Result   wfapi.Result         `json:"result"`
	Resolved *wfapi.ResolveResult `json:"resolved,omitempty"`
	// Cleanup is what the run's end did to the processes it still owned
	// (docs/runtime.md).
	Cleanup *Cleanup `json:"cleanup,omitempty"`
	// Transitions are each step's state changes, by step id.
	Transitions map[string][]Transition `json:"transitions,omitempty"`
}

// Cleanup: processes stopped when the run ended, and those left alone.
type Cleanup struct {
	Stopped []int            `json:"stopped"`
	Skipped []CleanupSkipped `json:"skipped"`
	// Note says how the processes were found when processes.json could
	// not be read.
	Note string `json:"note,omitempty"`
}

// CleanupSkipped is a process the cleanup did not signal, and why.
type CleanupSkipped struct {
	PID    int    `json:"pid"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

var statusMark = map[wfapi.RunStatus]string{
	wfapi.StatusPassed: "✅", wfapi.StatusFailed: "❌", wfapi.StatusCancelled: "⏹", wfapi.StatusPartialComplete: "🧩",
	wfapi.StatusBlockedByPolicy: "⛔", wfapi.StatusInvalid: "⚠️",
}

// StatusMarks are the emoji report.md heads a run's status with.
func StatusMarks() []string { return slices.Collect(maps.Values(statusMark)) }

// Graph renders the run's DAG coloured by step status.
func Graph(d Document) string {
	if d.Resolved == nil || len(d.Resolved.Steps) == 0 {
		return ""
	}
	p := &plan.Plan{Name: d.Resolved.Plan}
	for _, s := range d.Resolved.Steps {
		p.Steps = append(p.Steps, &plan.Step{ID: s.ID, Capability: s.Capability, Deps: s.Deps, Join: s.Join, Critical: s.Critical})
	}
	nodes := map[string]plan.Node{}
	for _, s := range d.Result.Steps {
		detail := string(s.Status)
		if s.Tool != "" {
			detail = s.Tool + "@" + s.Version + " · " + string(s.Status)
		}
		nodes[s.ID] = plan.Node{Detail: detail, Class: string(s.Status)}
	}
	for _, g := range d.Result.Gaps {
		nodes[g.StepID] = plan.Node{Detail: "gap: " + g.Reason, Class: "gap"}
	}
	return plan.Mermaid(p, nodes)
}

// IndentedSteps: report.json is indented for runs of up to this many
// steps, compact beyond (half the memory to write, a fraction of the size;
// indenting a 500-step report took two thirds of Finalize's time).
const IndentedSteps = 100

// MaxGraphSteps bounds the graph drawn in report.md: Mermaid renderers
// give up long before a plan of thousands of steps.
const MaxGraphSteps = 300

// Markdown renders report.md.
func Markdown(d Document) string {
	r := d.Result
	var b strings.Builder
	fmt.Fprintf(&b, "# %s %s: %s\n\n", statusMark[r.Status], r.Plan, r.Status)
	if r.Message != "" {
		fmt.Fprintf(&b, "%s\n\n", r.Message)
	}
	fmt.Fprintf(&b, "| | |\n|---|---|\n| workflow | `%s` |\n| run | `%s` |\n| started | %s |\n| ended | %s |\n| duration | %s |\n",
		r.WorkflowID, r.RunID, r.StartedAt, r.EndedAt, ms(r.DurationMS))
	if d.Resolved != nil {
		fmt.Fprintf(&b, "| failure policy | %s |\n| max parallel | %d |\n", d.Resolved.FailurePolicy, d.Resolved.MaxParallel)
	}
	if r.Route != nil {
		fmt.Fprintf(&b, "| routed by | %s `%s` |\n", r.Route.Kind, r.Route.ID)
	}
	if r.TraceID != "" {
		fmt.Fprintf(&b, "| trace | `%s` |\n", r.TraceID)
	}
	for _, h := range r.LostHosts {
		fmt.Fprintf(&b, "| lost host | `%s` (the run moved on) |\n", h)
	}
	if len(r.Next) > 0 {
		b.WriteString("\n## What next\n\n" + whatNext(r.Next))
	}
	if d.Resolved != nil && len(d.Resolved.Steps) > MaxGraphSteps {
		fmt.Fprintf(&b, "\n## Graph\n\n%d steps: too many to draw here (`capflow plan graph` draws the plan).\n", len(d.Resolved.Steps))
	} else if g := Graph(d); g != "" {
		fmt.Fprintf(&b, "\n## Graph\n\n```mermaid\n%s```\n", g)
	}
	if len(r.Steps) > 0 {
		b.WriteString("\n## Steps\n\n| step | capability | tool | status | attempts | duration | note |\n|---|---|---|---|---|---|---|\n")
		for _, s := range r.Steps {
			tool := "—"
			if s.Tool != "" {
				tool = s.Tool + "@" + s.Version
			}
			note := s.Reason
			if s.Envelope != nil && s.Status == wfapi.StepSucceeded {
				note = s.Envelope.Message
			}
			if c := s.Child; c != nil && s.Agent == nil {
				note += fmt.Sprintf(" — child run `%s` (%s), report: %s", c.WorkflowID, c.Status, c.Report.Markdown)
			}
			if s.JoinNote != "" {
				note = s.JoinNote + "; " + note
			}
			if s.ReusedFrom != "" {
				note += " — reused from `" + s.ReusedFrom + "`"
			}
			if s.CachedFrom != "" {
				note += " — cached result of `" + s.CachedFrom + "`, no tool ran"
			}
			for _, d := range s.Decisions {
				note += " — " + d.String()
			}
			what := s.Capability
			if s.Agent != nil {
				what, note = "agent", fmt.Sprintf("%s — %d model call(s), rounds below", note, s.Agent.Spent.LLMCalls)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s | %s |\n", s.ID, what, tool, s.Status, s.Attempts, ms(s.DurationMS), cell(note))
			for _, it := range s.Items {
				fmt.Fprintf(&b, "| %s | | | %s | %d | | %s |\n", wfapi.ItemLabel(s.ID, it.Index), it.Status, it.Attempts, cell(it.Reason))
			}
			if c := s.ItemCounts; c != nil && c.Count > len(s.Items) {
				fmt.Fprintf(&b, "| %s[%d…%d] | | | | | | %d more items (see report.json) |\n", s.ID, len(s.Items), c.Count-1, c.Count-len(s.Items))
			}
		}
	}
	b.WriteString(attemptsSection(r.Steps, d.Transitions))
	b.WriteString(agentSection(r.Steps))
	if len(r.Outputs) > 0 {
		b.WriteString("\n## Outputs\n\n| output | value |\n|---|---|\n")
		for _, n := range r.OutputNames() {
			js, _ := json.Marshal(r.Outputs[n])
			fmt.Fprintf(&b, "| %s | `%s` |\n", n, cell(string(js)))
		}
	}
	if len(r.Gaps) > 0 {
		b.WriteString("\n## Gaps\n\nNothing ran: these steps have no usable tool.\n\n| step | capability | reason | priority | proposed tool | message |\n|---|---|---|---|---|---|\n")
		for _, g := range r.Gaps {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | `%s` | %s |\n", g.StepID, g.MissingCapability, g.Reason, g.Priority, g.ProposedToolName, cell(g.ReasonMessage))
		}
	}
	if r.Policy != nil && len(r.Policy.Violations) > 0 {
		b.WriteString("\n## Policy\n\n")
		for _, v := range r.Policy.Violations {
			fmt.Fprintf(&b, "- ⛔ `%s` %s\n", v.Rule, v.Message)
		}
	}
	if len(r.Problems) > 0 {
		b.WriteString("\n## Problems\n\n")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "- %s:%d %s: %s\n", p.File, p.Line, p.Field, p.Message)
		}
	}
	if errs := errorsBySeverity(r); errs != "" {
		b.WriteString("\n## Errors by severity\n\n" + errs)
	}
	var withFeedback []wfapi.StepResult
	for _, s := range r.Steps {
		if s.Envelope != nil && len(s.Envelope.Feedback) > 0 {
			withFeedback = append(withFeedback, s)
		}
	}
	if len(withFeedback) > 0 {
		b.WriteString("\n## Feedback\n")
		for _, s := range withFeedback {
			fmt.Fprintf(&b, "\n### %s\n\n", s.ID)
			for _, f := range s.Envelope.Feedback {
				fmt.Fprintf(&b, "- `%s` **%s** %s: %s\n", f.Timestamp, f.Level, f.Phase, oneLine(f.Message))
				if f.Detail != "" && f.Level != envelope.LevelInfo {
					b.WriteString(fenced(strings.TrimSpace(f.Detail)))
				}
			}
		}
	}
	if c := d.Cleanup; c != nil && (len(c.Stopped) > 0 || len(c.Skipped) > 0 || c.Note != "") {
		fmt.Fprintf(&b, "\n## Processes at the end\n\nStopped %d process(es) the run still owned: %v.\n", len(c.Stopped), c.Stopped)
		if c.Note != "" {
			fmt.Fprintf(&b, "\n%s.\n", c.Note)
		}
		for _, sk := range c.Skipped {
			fmt.Fprintf(&b, "- left alone: %s (pid %d): %s\n", sk.Name, sk.PID, sk.Reason)
		}
	}
	if d.Resolved != nil && len(d.Resolved.Resolution) > 0 {
		b.WriteString("\n## Resolution\n\n| step | tool | source | digest |\n|---|---|---|---|\n")
		for _, res := range d.Resolved.Resolution {
			fmt.Fprintf(&b, "| %s | %s@%s | %s | `%s` |\n", res.StepID, res.Tool, res.Version, res.Source, res.Digest)
		}
	}
	if len(r.Warnings) > 0 {
		b.WriteString("\n## Warnings\n\nFailures the run absorbed by their severity (failure_policy: by_severity), processes left on hosts the run lost, and stored outputs found missing or altered with what the run did:\n\n")
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "- %s\n", oneLine(w))
		}
	}
	return b.String()
}

// whatNext lists what to do about each failure (docs/errors.md): the
// step, its code and severity, the command, the advice, its stderr tail.
func whatNext(next []wire.Next) string {
	var b strings.Builder
	for _, n := range next {
		b.WriteString("- ")
		if n.Step != "" {
			fmt.Fprintf(&b, "**%s** ", n.Step)
		}
		if n.Code != "" {
			fmt.Fprintf(&b, "`%s` %s", n.Code, n.Severity)
		}
		if n.Command != "" {
			fmt.Fprintf(&b, ": `%s`", n.Command)
		}
		if n.Advice != "" {
			fmt.Fprintf(&b, "; %s", oneLine(n.Advice))
		}
		b.WriteString("\n")
		if len(n.Stderr) > 0 {
			b.WriteString(fenced(strings.Join(n.Stderr, "\n")))
		}
	}
	return b.String()
}

// errorsBySeverity aggregates step errors (docs/errors.md).
func errorsBySeverity(r wfapi.Result) string {
	by := map[caperr.Severity][]string{}
	for _, s := range r.Steps {
		if s.Envelope != nil && s.Envelope.Error != nil && s.Status != wfapi.StepSucceeded {
			sev := caperr.Severity(s.Envelope.Error.Severity)
			by[sev] = append(by[sev], fmt.Sprintf("%s (`%s`)", s.ID, s.Envelope.Error.Code))
		}
	}
	if len(by) == 0 {
		return ""
	}
	var keys []caperr.Severity
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Rank() != keys[j].Rank() {
			return keys[i].Rank() < keys[j].Rank()
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "- **%s**: %s\n", k, strings.Join(by[k], ", "))
	}
	return b.String()
}

func ms(n int64) string {
	if n >= 1000 {
		return fmt.Sprintf("%.2fs", float64(n)/1000)
	}
	return fmt.Sprintf("%dms", n)
}

// oneLine is text from a tool, a model or a person as one line of
// Markdown that stays text: no link, image or autolink can form in it (a
// report is rendered, by the console among others).
func oneLine(s string) string { return inert.Replace(strings.ReplaceAll(s, "\n", " ")) }

var inert = strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, "<", `\<`, ">", `\>`)

func cell(s string) string {
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return strings.ReplaceAll(oneLine(s), "|", "\\|")
}

// attemptsSection tells, for each step that took more than one attempt,
// how each went, from its transitions (its folder's attempt records; an
// attempt with none ended with its worker): "" when no step was retried.
func attemptsSection(steps []wfapi.StepResult, trans map[string][]Transition) string {
	var b strings.Builder
	for _, s := range steps {
		if s.Attempts < 2 {
			continue
		}
		told := map[int]string{}
		for _, t := range trans[s.ID] {
			var n int
			if _, err := fmt.Sscanf(t.Reason, "attempt %d failed", &n); t.State == "retrying" && err == nil {
				told[n] = fmt.Sprintf("- %s: %s", t.At, cell(t.Reason))
			}
		}
		var lines []string
		for n := 1; n < s.Attempts; n++ {
			line, ok := told[n]
			if !ok {
				line = fmt.Sprintf("- attempt %d ended without a record (its worker stopped, or the server timed it out)", n)
			}
			lines = append(lines, line)
		}
		end := string(s.Status)
		if e := s.Envelope; e != nil && e.Error != nil && e.Error.Cause != "" {
			end += fmt.Sprintf(" (%s, then %s)", e.Error.Cause, e.Error.Code) // the attempt's own code, then the step's
		} else if e != nil && e.Error != nil {
			end += fmt.Sprintf(" (%s)", e.Error.Code)
		}
		if s.Reason != "" {
			end += ": " + s.Reason
		}
		fmt.Fprintf(&b, "\n**%s** (%d attempts)\n\n%s\n- %s: attempt %d %s\n", s.ID, s.Attempts, strings.Join(lines, "\n"), s.EndedAt, s.Attempts, cell(end))
	}
	if b.Len() == 0 {
		return ""
	}
	return "\n## Attempts\n\nSteps that took more than one attempt, each attempt's end:\n" + b.String()
}

// fenced is text from a tool as an indented code block whose fence is
// longer than any run of backticks in it: no line of the text can close
// the block and become Markdown (a link, an image).
func fenced(text string) string {
	longest, run := 0, 0
	for _, c := range text {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", max(3, longest+1))
	return fmt.Sprintf("  %s\n  %s\n  %s\n", f, strings.ReplaceAll(text, "\n", "\n  "), f)
}
