package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

func (a *App) planCommand() *cobra.Command {
	c := &cobra.Command{Use: "plan", Short: "Check, draw and test plans; nothing runs on a server", RunE: a.groupRun}
	c.AddCommand(a.planCheck(), a.planGraph(), a.planTest())
	return c
}

// checked is a plan with its preflight report.
type checked struct {
	cfg    *config.Config
	reg    *registry.Registry
	plan   *plan.Plan
	report *preflight.Report
}

// StatusExit maps a plan or run status to its envelope code and exit.
func StatusExit(status string) (caperr.Code, int) {
	switch status {
	case preflight.Ready, string(wfapi.StatusPassed):
		return "", 0
	case preflight.Invalid:
		return caperr.InvalidInput, 2
	case preflight.PartialComplete:
		return caperr.ToolNotFound, 3
	case preflight.BlockedByPolicy:
		return caperr.PolicyBlocked, 4
	case string(wfapi.StatusCancelled):
		return caperr.Cancelled, 5
	}
	return caperr.ToolFailure, 1
}

// check parses a plan file and runs the preflight checks. A non-nil error
// means capflow could not check at all (config, policy).
func (a *App) check(file string, inputs []string, inputsFile string, optionalInputs bool) (*checked, error) {
	cfg, reg, err := a.loadRegistry()
	if err != nil {
		return nil, err
	}
	// A configuration mistake (a misspelled active kit) is said as such,
	// positioned, not sold as tools that are missing.
	var conf caperr.Problems
	for _, p := range reg.Problems {
		if p.Code == caperr.ConfigError {
			conf = append(conf, p)
		}
	}
	if len(conf) > 0 {
		return nil, conf
	}
	pol, err := a.loadPolicy()
	if err != nil {
		return nil, err
	}
	data, err := readPlanFile(file)
	if err != nil {
		return &checked{cfg: cfg, reg: reg, report: preflight.InvalidReport(file, caperr.Problems{asError(err)})}, nil
	}
	p, probs := a.proj.ParsePlan(file, data)
	if len(probs) > 0 {
		return &checked{cfg: cfg, reg: reg, report: preflight.InvalidReport(file, probs)}, nil
	}
	var props map[string]any
	if len(p.Inputs) > 0 {
		props = map[string]any{}
		for k, v := range p.Inputs {
			props[k] = v
		}
	}
	given, err := parseInputs(inputs, inputsFile, props)
	if err != nil {
		return nil, err
	}
	rep := a.proj.Check(p, given, reg, pol, optionalInputs && len(inputs) == 0 && inputsFile == "")
	return &checked{cfg: cfg, reg: reg, plan: p, report: rep}, nil
}

// reportEnvelope wraps a preflight report in an envelope whose exit code
// follows the status.
func reportEnvelope(id string, rep *preflight.Report, warnings []string) envelope.Envelope {
	b := envelope.NewBuilder(id)
	for _, w := range warnings {
		b.Warn("registry", w)
	}
	code, exit := StatusExit(rep.Status)
	if exit == 0 {
		b.Info("check", rep.Message)
		return b.Succeed(rep.Message, rep)
	}
	for _, g := range rep.Gaps {
		b.Error("gap", fmt.Sprintf("%s: %s", g.StepID, g.ReasonMessage), g.Reason)
	}
	for _, v := range rep.Policy.Violations {
		b.Error("policy", v.Message, v.Rule)
	}
	for _, p := range rep.Problems {
		b.Error("validate", formatProblem(p), string(p.Code))
	}
	return b.FailWithExit(code, exit, rep.Message, rep)
}

func formatProblem(p preflight.Problem) string {
	e := caperr.New(p.Code, "%s", p.Message).At(p.File, p.Line, p.Column, p.Field)
	return e.Error()
}

func (a *App) planCheck() *cobra.Command {
	var inputs []string
	var inputsFile string
	c := &cobra.Command{
		Use:   "check PLAN",
		Short: "Parse, validate, resolve, gap-check and policy-check a plan; nothing runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ck, err := a.check(args[0], inputs, inputsFile, true)
			if err != nil {
				return err
			}
			env := reportEnvelope("capflow-plan-check", ck.report, ck.reg.Warnings)
			a.set(env, func(w io.Writer) { prettyReport(w, ck.cfg.Root, ck.report, a.outputPath) })
			return nil
		},
	}
	c.Flags().StringArrayVar(&inputs, "input", nil, "a plan input as NAME=VALUE (repeatable)")
	c.Flags().StringVar(&inputsFile, "inputs-file", "", "a YAML or JSON file of plan inputs")
	return c
}

// scaffoldHint says how to scaffold the proposed tools: from the report
// file the user named (--output-path), or how to make one.
func scaffoldHint(gapsFile string) string {
	if gapsFile != "" {
		return "capflow tools scaffold --from-gaps " + gapsFile
	}
	return "add --output-path REPORT.json, then capflow tools scaffold --from-gaps REPORT.json"
}

// gapAdvice is what to do about a gap: a tool to scaffold where none
// provides the capability, the manifest to fix where one that declares it
// is left out for its problems, the pin where the step pins one that does
// not exist. Where one does but cannot take the step's inputs, the step
// is what to fix: a tool of its own would serve the capability to every
// plan of the project in place of that one.
func gapAdvice(g wire.Gap, gapsFile string) string {
	switch {
	case g.Pinned() != "":
		return fmt.Sprintf("fix or drop the step's pin (tool: %s), or give the project a tool of that name", g.Pinned())
	case len(g.LeftOut()) > 0:
		return fmt.Sprintf("fix: %s (capflow tools validate names its problems), not a new tool", strings.Join(g.LeftOut(), ", "))
	case g.Reason == gap.NoCapabilityMatch:
		return fmt.Sprintf("proposed tool: %s (%s)", g.ProposedToolName, scaffoldHint(gapsFile))
	case g.Reason != gap.SchemaIncompatible:
		return ""
	case g.MissingCapability == "":
		return "fix: the step's inputs, or what feeds them, to fit the sub-plan's inputs"
	case len(g.Producers()) > 0:
		return fmt.Sprintf("fix: what the step takes from %s, or that tool's output_schema (require the field, give it a type); a tool of its own would be given the same", strings.Join(g.Producers(), ", "))
	}
	return fmt.Sprintf("fix: the step's inputs, or what feeds them, to fit its tool; a tool of its own, %s, would serve %s to every plan of the project in place of it (%s --step %s --alongside)", g.ProposedToolName, g.MissingCapability, scaffoldHint(gapsFile), g.StepID)
}

// gapAt is where a gap's step is written (" at FILE:LINE"), or "".
func gapAt(g wire.Gap) string {
	if g.Line == 0 {
		return ""
	}
	return " at " + printable(g.Where())
}

func prettyReport(w io.Writer, root string, rep *preflight.Report, gapsFile string) {
	scr := screenOf(w)
	mark := map[string]string{preflight.Ready: "✓", preflight.PartialComplete: "✗", preflight.BlockedByPolicy: "⛔", preflight.Invalid: "✗"}[rep.Status]
	color := red
	if rep.Status == preflight.Ready {
		color = green
	}
	fmt.Fprintf(w, "%s %s: %s\n", scr.paint(color, mark), rep.Plan, scr.paint(bold, rep.Status))
	if len(rep.Problems) > 0 {
		// The list says each; the headline only what they are.
		what, _, _ := strings.Cut(rep.Message, ": ")
		fmt.Fprintf(w, "  %s (%s):\n", what, caperr.Count(len(rep.Problems), "problem"))
		var ps []Problem
		for _, p := range rep.Problems {
			ps = append(ps, Problem{File: p.File, Line: p.Line, Column: p.Column, Field: p.Field, Message: p.Message, Code: p.Code})
		}
		printProblems(w, root, ps)
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		return
	}
	fmt.Fprintf(w, "  %s\n", rep.Message)
	gaps := map[string]string{}
	for _, g := range rep.Gaps {
		gaps[g.StepID] = g.Reason
	}
	var rows [][]string
	for _, r := range rep.Resolution {
		rows = append(rows, []string{r.StepID, r.Capability, r.Tool + "@" + r.Version, "ok"})
	}
	for _, a := range rep.Agents {
		if gaps[a.Step] == "" {
			rows = append(rows, []string{a.Step, "agent", "model " + a.Model, "ok (below)"})
		}
	}
	for _, g := range rep.Gaps {
		rows = append(rows, []string{g.StepID, g.MissingCapability, "—", "gap: " + g.Reason})
	}
	if len(rows) > 0 {
		fmt.Fprintln(w)
		table(w, []string{"  STEP", "CAPABILITY", "TOOL", "STATUS"}, indent(rows))
	}
	if len(rep.Gaps) > 0 {
		fmt.Fprintln(w, "\ngaps:")
		for _, g := range rep.Gaps {
			fmt.Fprintf(w, "  ✗ %s%s [%s, priority %s]: %s\n", printable(g.StepID), gapAt(g), g.Reason, g.Priority, printableText(g.ReasonMessage))
			if advice := gapAdvice(g, gapsFile); advice != "" {
				fmt.Fprintf(w, "      %s\n", advice)
			}
		}
	}
	prettyAgents(w, rep)
	prettyConfinement(w, rep)
	prettyCache(w, rep)
	if len(rep.Limits) > 0 {
		fmt.Fprintln(w, "\nlimits (across every run and worker):")
		for _, l := range rep.Limits {
			what := l.Tool
			if l.Capability != "" {
				what = "capability " + l.Capability
			}
			fmt.Fprintf(w, "  %s [%s]: %s\n", what, strings.Join(l.Steps, ", "), l.Limits)
		}
	}
	fmt.Fprintf(w, "\npolicy: ")
	if rep.Policy.Allowed {
		fmt.Fprintf(w, "allowed (max_parallel %d)\n", rep.Policy.MaxParallel)
	} else {
		fmt.Fprintln(w, "blocked")
		for _, v := range rep.Policy.Violations {
			step := ""
			if v.StepID != "" {
				step = " [step " + v.StepID + "]"
			}
			fmt.Fprintf(w, "  ⛔ %s%s: %s\n", v.Rule, step, v.Message)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	for _, n := range rep.Policy.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// prettyConfinement shows what the plan's process-starting tools may
// touch: the defaults in one line, anything beyond them named.
func prettyConfinement(w io.Writer, rep *preflight.Report) {
	if len(rep.Confinement) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsandbox (policy %s):\n", rep.Policy.Sandbox)
	for _, c := range rep.Confinement {
		what := "the defaults (project read-only, step folder writable, own loopback only)"
		if len(c.Beyond) > 0 {
			what = strings.Join(c.Beyond, "; ")
		}
		fmt.Fprintf(w, "  %s [%s]: %s\n", c.Tool, strings.Join(c.Steps, ", "), what)
	}
}

func prettyCache(w io.Writer, rep *preflight.Report) {
	if len(rep.Cache) == 0 {
		return
	}
	fmt.Fprintln(w, "\ncache:")
	for _, c := range rep.Cache {
		if c.Cached {
			fmt.Fprintf(w, "  ✓ %s (%s): a result of the same tool and inputs up to %s old is reused\n", c.Step, c.Tool, c.TTL)
		} else {
			fmt.Fprintf(w, "  ✗ %s (%s): not cached: %s\n", c.Step, c.Tool, c.Why)
		}
	}
}

func indent(rows [][]string) [][]string {
	for _, r := range rows {
		r[0] = "  " + r[0]
	}
	return rows
}

// GraphNodes labels each step with its tool or its gap.
func GraphNodes(rep *preflight.Report) map[string]plan.Node {
	nodes := map[string]plan.Node{}
	for _, r := range rep.Resolution {
		nodes[r.StepID] = plan.Node{Detail: "→ " + r.Tool + "@" + r.Version, Class: "ready"}
	}
	for _, g := range rep.Gaps {
		nodes[g.StepID] = plan.Node{Detail: "⚠ gap: " + g.Reason, Class: "gap"}
	}
	for _, v := range rep.Policy.Violations {
		if v.StepID != "" {
			nodes[v.StepID] = plan.Node{Detail: "⛔ " + v.Rule, Class: "blocked"}
		}
	}
	return nodes
}

func (a *App) planGraph() *cobra.Command {
	var format string
	var inputs []string
	c := &cobra.Command{
		Use:   "graph PLAN",
		Short: "Print the plan's DAG as mermaid or dot, steps labelled with their tool or gap",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "mermaid" && format != "dot" {
				return caperr.New(caperr.InvalidInput, "--format must be mermaid or dot, not %q", format)
			}
			ck, err := a.check(args[0], inputs, "", true)
			if err != nil {
				return err
			}
			if ck.plan == nil {
				a.set(reportEnvelope("capflow-plan-graph", ck.report, nil), func(w io.Writer) { prettyReport(w, ck.cfg.Root, ck.report, a.outputPath) })
				return nil
			}
			nodes := GraphNodes(ck.report)
			var g string
			if format == "dot" {
				g = plan.Dot(ck.plan, nodes)
			} else {
				g = plan.Mermaid(ck.plan, nodes)
			}
			b := envelope.NewBuilder("capflow-plan-graph")
			b.Info("check", ck.report.Message)
			env := b.Succeed(fmt.Sprintf("%s graph of %s (%s)", format, ck.plan.Name, ck.report.Status),
				map[string]any{"format": format, "graph": g, "status": ck.report.Status, "plan": ck.plan.Name})
			a.set(env, func(w io.Writer) { fmt.Fprint(w, strings.TrimRight(g, "\n")+"\n") })
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "mermaid", "mermaid or dot")
	c.Flags().StringArrayVar(&inputs, "input", nil, "a plan input as NAME=VALUE (repeatable)")
	return c
}

// prettyAgents shows each agent step: its model, bounds and scope, and
// which of its calls would wait for a person.
func prettyAgents(w io.Writer, rep *preflight.Report) {
	if len(rep.Agents) == 0 {
		return
	}
	fmt.Fprintln(w, "\nagent steps (docs/agents.md):")
	for _, a := range rep.Agents {
		b := a.Budget
		fmt.Fprintf(w, "  %s: model %s, max_rounds %d (max_repairs %d), budget llm_calls %d", a.Step, a.Model, a.MaxRounds, a.MaxRepairs, b.LLMCalls)
		if b.Tokens > 0 {
			fmt.Fprintf(w, ", tokens %d", b.Tokens)
		}
		if b.USD > 0 {
			fmt.Fprintf(w, ", usd %g", b.USD)
		}
		fmt.Fprintf(w, ", approve %s\n", a.Approve)
		for _, s := range a.Scope {
			tool, gate := s.Tool, ""
			if tool == "" {
				tool = "— (a gap)"
			}
			if s.Gated {
				gate = " (its calls wait for approval)"
			}
			fmt.Fprintf(w, "    %s → %s%s\n", s.Capability, tool, gate)
		}
	}
}
