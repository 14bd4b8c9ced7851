package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/wfapi"
)

// A run's result as people read it (pretty output) and as its envelope
// records its phases.

// resultPhases records in the envelope what the run went through: its
// run (segments, duration), its steps by status, the failures it
// absorbed (a warning each), its report.
func resultPhases(b *envelope.Builder, res *capflowclient.Result) {
	if res.StartedAt != "" {
		msg := fmt.Sprintf("%s from %s", res.Status, res.StartedAt)
		if res.EndedAt != "" {
			msg += fmt.Sprintf(" to %s (%d ms)", res.EndedAt, res.DurationMS)
		}
		b.Info("run", msg)
	}
	counts := map[wfapi.StepState]int{}
	for _, s := range res.Steps {
		counts[s.Status]++
	}
	for st, n := range res.StepCounts {
		counts[st] = n
	}
	var parts []string
	for _, st := range []wfapi.StepState{wfapi.StepSucceeded, wfapi.StepFailed, wfapi.StepSkipped, wfapi.StepCancelled, wfapi.StepBlocked, wfapi.StepWaiting, wfapi.StepRunning, wfapi.StepPending} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	if len(parts) > 0 {
		b.Info("steps", strings.Join(parts, ", "))
	}
	for _, w := range res.Warnings {
		b.Warn("absorbed", w)
	}
	for _, n := range res.Next {
		b.Info("next", nextText(n))
	}
	if res.Report.JSON != "" {
		b.Info("report", res.Report.JSON+" · "+res.Report.Markdown)
	}
}

func prettyResult(w io.Writer, res *capflowclient.Result, url string) {
	scr := screenOf(w)
	rows, hidden := resultRows(res)
	if len(rows) > 0 {
		table(w, []string{"  STEP", "CAPABILITY", "TOOL", "STATUS", "ATTEMPTS", "NOTE"}, rows)
	}
	if hidden > 0 {
		fmt.Fprintf(w, "  %s %d steps succeeded (the report lists each)\n", scr.paint(green, "✓"), hidden)
	}
	if res.StepsOmitted > 0 {
		fmt.Fprintf(w, "  %s (%d not listed here; the report has every step)\n", countsText(res.StepCounts), res.StepsOmitted)
	}
	prettyAgentRounds(w, res.Steps)
	for _, warn := range res.Warnings {
		fmt.Fprintf(w, "  %s %s\n", scr.paint(yellow, "warning:"), printable(warn))
	}
	for _, g := range res.Gaps {
		fmt.Fprintf(w, "  gap %s [%s]: %s\n", g.StepID, g.Reason, printable(g.ReasonMessage))
	}
	if len(res.Outputs) > 0 {
		fmt.Fprintln(w, "outputs:")
		for _, n := range res.OutputNames() {
			fmt.Fprintf(w, "  %s: %s\n", n, shortJSON(res.Outputs[n]))
		}
	}
	if res.Report.Markdown != "" {
		fmt.Fprintf(w, "report: %s\n", res.Report.Markdown)
	}
	if url != "" {
		fmt.Fprintf(w, "Web UI: %s\n", url)
	}
	if res.TraceID != "" {
		fmt.Fprintf(w, "trace: %s\n", res.TraceID)
	}
	prettyNext(w, res.Next, filepath.Dir(res.Report.JSON))
	// The verdict last: what a person reads first when the output ends.
	mark := map[wfapi.RunStatus]string{wfapi.StatusPassed: "✓", wfapi.StatusRunning: "…", wfapi.StatusPaused: "⏸", wfapi.StatusCancelled: "⏹", wfapi.StatusBlockedByPolicy: "⛔"}[res.Status]
	if mark == "" {
		mark = "✗"
	}
	head := fmt.Sprintf("%s %s %s", scr.paint(runColors[res.Status], mark), res.Plan, scr.paint(bold, string(res.Status)))
	if res.Message != "" {
		head += ": " + printable(brief(res.Message))
	}
	fmt.Fprintln(w, head)
}

// prettyNext prints what to do about each failure: its stderr's last
// lines (and where its stderr.log is, in the run's folder runDir, "."
// where the run has none yet), then the command and the advice.
func prettyNext(w io.Writer, next []capflowclient.Next, runDir string) {
	scr := screenOf(w)
	for _, n := range next {
		if len(n.Stderr) > 0 {
			where := "its step folder's stderr.log"
			if runDir != "." {
				where = printable(filepath.Join(runfolder.Step(runDir, n.Step, -1), "stderr.log"))
			}
			fmt.Fprintf(w, "  %s's stderr, last lines (%s has every line):\n", n.Step, where)
			for _, l := range n.Stderr {
				fmt.Fprintf(w, "    %s %s\n", scr.paint(dim, "│"), printable(l))
			}
		}
		fmt.Fprintf(w, "%s %s\n", scr.paint(bold, "next:"), printableText(nextText(n)))
	}
}

// nextText is one failure's next step on one line: "build (TOOL_FAILURE,
// HIGH): capflow rerun ID --from build; read the stderr tail ...".
func nextText(n capflowclient.Next) string {
	var head string
	switch {
	case n.Step != "" && n.Code != "":
		head = fmt.Sprintf("%s (%s, %s)", n.Step, n.Code, n.Severity)
	case n.Step != "":
		head = n.Step
	default:
		head = string(n.Code)
	}
	var parts []string
	if n.Command != "" {
		parts = append(parts, n.Command)
	}
	if n.Advice != "" {
		parts = append(parts, n.Advice)
	}
	return head + ": " + strings.Join(parts, "; ")
}

// compactAbove: a result of more steps lists only those that did not
// succeed (and a count of the rest), so a passing run fits a screen.
const compactAbove = 12

// resultRows are the result's table rows, and how many succeeded steps
// were left out of it.
func resultRows(res *capflowclient.Result) (rows [][]string, hidden int) {
	compact := len(res.Steps) > compactAbove
	for _, s := range res.Steps {
		if compact && s.Status == wfapi.StepSucceeded && (s.ItemCounts == nil || s.ItemCounts.Failed+s.ItemCounts.Skipped == 0) {
			hidden++
			continue
		}
		tool := "—"
		if s.Tool != "" {
			tool = s.Tool + "@" + s.Version
		}
		note := s.Reason
		if s.Status == wfapi.StepSucceeded && s.Envelope != nil {
			note = s.Envelope.Message
		}
		if c := s.ItemCounts; c != nil {
			note = fmt.Sprintf("%d items: %d succeeded, %d failed, %d skipped", c.Count, c.Succeeded, c.Failed, c.Skipped)
		}
		if s.Latest != nil && note == "" {
			note = s.Latest.Message // what a running step says now
		}
		rows = append(rows, []string{"  " + s.ID, stepWhat(s), tool, string(s.Status), fmt.Sprint(s.Attempts), brief(note)})
		for _, it := range s.Items {
			if it.Status != wfapi.StepSucceeded {
				rows = append(rows, []string{"    " + wfapi.ItemLabel(s.ID, it.Index), "", "", string(it.Status), fmt.Sprint(it.Attempts), it.Reason})
			}
		}
	}
	return rows, hidden
}

// prettyAgentRounds shows each agent step's rounds: what each proposed and
// what came of it (docs/agents.md).
func prettyAgentRounds(w io.Writer, steps []capflowclient.StepResult) {
	for _, s := range steps {
		a := s.Agent
		if a == nil || len(a.Rounds) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s: %d model call(s), %d tokens, $%.4f\n", s.ID, a.Spent.LLMCalls, a.Spent.Tokens, a.Spent.USD)
		for _, rd := range a.Rounds {
			fmt.Fprintf(w, "  round %d · %s · %d/%d tokens · %s\n", rd.Round, printable(rd.Model), rd.InputTokens, rd.OutputTokens, roundOutcome(rd))
			for _, c := range rd.Calls {
				fmt.Fprintf(w, "      %s\n", printable(c))
			}
			for _, r := range rd.Refused {
				fmt.Fprintf(w, "      refused: %s\n", printable(r))
			}
		}
		if a.Breach != "" {
			fmt.Fprintf(w, "  stopped at its budget: %s\n", a.Breach)
		}
	}
}

func roundOutcome(rd capflowclient.AgentRound) string {
	out := "proposed"
	switch {
	case rd.Finished:
		out = "finished"
	case len(rd.Refused) > 0:
		out = "refused: nothing ran"
	case rd.SubRun != "":
		out = "ran as " + rd.SubRun
	}
	if rd.Approval != "" {
		out += ", gated proposal sha256:" + rd.Approval[:16]
	}
	if rd.Reused {
		out += " (answer reused)"
	}
	return out
}
