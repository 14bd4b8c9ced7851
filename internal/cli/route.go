package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/router"
	"github.com/capflow/capflow/internal/temporalx"
	"github.com/capflow/capflow/internal/wfapi"
)

func (a *App) buildRouter(reg *registry.Registry, pol *policy.Policy) (*router.Router, error) {
	return a.proj.Router(reg, pol)
}

func (a *App) routeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   `route "TEXT"`,
		Short: "Turn a request into a plan (rules first, then the LLM if configured); nothing runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			const id = "capflow-route"
			_, reg, err := a.loadRegistry()
			if err != nil {
				return err
			}
			pol, err := a.loadPolicy()
			if err != nil {
				return err
			}
			r, err := a.buildRouter(reg, pol)
			if err != nil {
				return err
			}
			res, err := r.Route(a.ctx, args[0])
			if err != nil {
				a.set(failEnv(id, err, map[string]any{"llm_calls": llmCalls(res)}), nil)
				return nil
			}
			a.set(routeEnvelope(id, res), func(w io.Writer) {
				if res.Plan == nil {
					fmt.Fprintf(w, "✗ %s\n", res.Message)
					return
				}
				by := fmt.Sprintf(" (%s %s)", res.Kind, res.ID)
				if strings.Contains(res.Message, res.ID) {
					by = "" // "matched rule webm-to-mp4" names it already
				}
				fmt.Fprintf(w, "✓ %s%s\n---\n%s", res.Message, by, res.PlanYAML)
			})
			return nil
		},
	}
}

func llmCalls(res *router.Result) int {
	if res == nil {
		return 0
	}
	return res.LLMCalls
}

func routeEnvelope(id string, res *router.Result) envelope.Envelope {
	b := envelope.NewBuilder(id)
	data := map[string]any{"entities": res.Entities, "llm_calls": res.LLMCalls}
	if res.Plan == nil {
		data["plan"] = nil
		data["route"] = nil
		data["closest"] = nonNilStrings(res.Closest)
		b.Error("route", res.Message, "")
		return b.Fail(caperr.ToolNotFound, res.Message, data)
	}
	data["plan"] = res.PlanYAML
	data["route"] = map[string]any{"kind": res.Kind, "id": res.ID}
	b.Info("route", res.Message)
	return b.Succeed(res.Message, data)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Operation is a step in the agent's verdict.
type Operation struct {
	StepID     string `json:"step_id"`
	Capability string `json:"capability"`
	Reason     string `json:"reason,omitempty"`
	// Tool and Runs say, for a planned operation, which tool would run
	// and what it executes (docs/cli.md, agent --dry-run).
	Tool string `json:"tool,omitempty"`
	Runs string `json:"runs,omitempty"`
}

func (a *App) agentCommand() *cobra.Command {
	var dry bool
	var inputs []string
	c := &cobra.Command{
		Use:   `agent "TEXT" [--dry-run]`,
		Short: "Route a request, check gaps and policy, then run it: task completed, or what is missing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.agent(args[0], inputs, dry)
		},
	}
	c.Flags().BoolVar(&dry, "dry-run", false, "plan and check only; show what would run")
	c.Flags().StringArrayVar(&inputs, "input", nil, "a plan input as NAME=VALUE (repeatable)")
	return c
}

func (a *App) phase(name, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	a.phases = append(a.phases, envelope.Feedback{Phase: name, Level: envelope.LevelInfo, Message: msg, Timestamp: envelope.Timestamp(envelope.Now())})
	if a.jsonOutput() && os.Getenv("CAPFLOW_PROGRESS") != "1" {
		return
	}
	fmt.Fprintf(a.Stderr, "● %-13s %s\n", name, msg)
}

func (a *App) agent(text string, inputs []string, dry bool) error {
	const id = "capflow-agent"
	cfg, reg, err := a.loadRegistry()
	if err != nil {
		return err
	}
	pol, err := a.loadPolicy()
	if err != nil {
		return err
	}
	r, err := a.buildRouter(reg, pol)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(a.ctx)
	defer stop()

	// 1. planning
	res, err := r.Route(ctx, text)
	if err != nil {
		a.phase("planning", "failed: %v", err)
		a.set(failEnv(id, err, map[string]any{"verdict": "task not completed"}), nil)
		return nil
	}
	if res.Plan == nil {
		a.phase("planning", "%s", res.Message)
		a.setVerdict(id, verdictData{Lang: requestLanguage(text), Status: preflight.PartialComplete, Message: res.Message, Route: res})
		return nil
	}
	a.phase("planning", "%s → plan %s with %s", res.Message, res.Plan.Name, caperr.Count(len(res.Plan.Steps), "step"))

	// 2. gap check and 3. policy check
	props := planProps(res.Plan)
	given, err := parseInputs(inputs, "", props)
	if err != nil {
		return err
	}
	rep := a.proj.Check(res.Plan, given, reg, pol, false)
	if len(rep.Gaps) > 0 {
		var caps []string
		for _, g := range rep.Gaps {
			caps = append(caps, g.MissingCapability+" ("+g.Reason+")")
		}
		a.phase("gap check", "missing: %s", strings.Join(caps, ", "))
	} else {
		a.phase("gap check", "every step has a tool")
	}
	if rep.Policy.Allowed {
		a.phase("policy check", "allowed")
	} else {
		a.phase("policy check", "blocked: %s", rep.Policy.Violations[0].Message)
	}
	vd := verdictData{Lang: requestLanguage(text), Status: rep.Status, Message: rep.Message, Route: res, Report: rep}
	if rep.Status != preflight.Ready {
		a.setVerdict(id, vd)
		return nil
	}
	if dry {
		a.phase("preview", "dry run: %s would run", caperr.Count(len(res.Plan.Steps), "operation"))
		vd.DryRun = true
		a.setVerdict(id, vd)
		return nil
	}

	// 4. execution
	_, tc, err := a.dial(ctx)
	if err != nil {
		a.phase("execution", "%v", err)
		a.set(failEnv(id, err, map[string]any{"verdict": "task not completed"}), nil)
		return nil
	}
	defer tc.Close()
	run, err := tc.StartWith(ctx, capflowclient.StartOptions{ID: NewWorkflowID(res.Plan.Name),
		Summary: fmt.Sprintf("agent: %s", text), Details: staticDetails(res.Plan)},
		wfapi.Input{Plan: res.PlanValue, Inputs: given})
	if err != nil {
		return caperr.Wrap(caperr.DependencyUnavailable, err, "cannot start the run")
	}
	a.phase("execution", "%s (%s)", run.ID, temporalx.RunURL(cfg.Temporal, run.ID, run.RunID))
	result, err := a.follow(ctx, tc.Get(run.ID))
	if err != nil {
		return err
	}
	vd.Status, vd.Message, vd.Result = string(result.Status), result.Message, result
	a.setVerdict(id, vd)
	return nil
}

type verdictData struct {
	Lang    string // the request's language: "ru" or "en"
	Status  string
	Message string
	DryRun  bool
	Route   *router.Result
	Report  *preflight.Report
	Result  *capflowclient.Result
}

func (a *App) setVerdict(id string, v verdictData) {
	done, missing, planned := []Operation{}, []Operation{}, []Operation{}
	switch {
	case v.DryRun && v.Report != nil:
		for _, r := range v.Report.Resolution {
			op := Operation{StepID: r.StepID, Capability: r.Capability, Tool: r.Tool + "@" + r.Version, Reason: "would run"}
			if r.Manifest != nil {
				op.Runs = Runs(r.Manifest)
			}
			planned = append(planned, op)
		}
	case v.Result != nil:
		for _, s := range v.Result.Steps {
			if s.Status == wfapi.StepSucceeded {
				done = append(done, Operation{StepID: s.ID, Capability: s.Capability})
			} else {
				missing = append(missing, Operation{StepID: s.ID, Capability: s.Capability, Reason: string(s.Status) + ": " + s.Reason})
			}
		}
	case v.Report != nil:
		gaps := map[string]string{}
		for _, g := range v.Report.Gaps {
			// What is missing and what to do about it (the gap's message).
			gaps[g.StepID] = g.Reason + ": " + g.ReasonMessage
		}
		for _, s := range v.Route.Plan.Steps {
			reason := "not run: the plan is " + v.Status
			if g, ok := gaps[s.ID]; ok {
				reason = g
			}
			missing = append(missing, Operation{StepID: s.ID, Capability: s.Capability, Reason: reason})
		}
	}
	completed := v.Status == string(wfapi.StatusPassed)
	verdict := "task not completed"
	if completed {
		verdict = "task completed"
	}
	if v.DryRun {
		verdict = "dry run: ready to run"
	}
	data := map[string]any{"verdict": verdict, "status": v.Status, "done": done, "missing": missing,
		"language": v.lang(), "headline": labels[v.lang()][verdict]}
	if v.DryRun {
		data["planned"] = planned
	}
	if v.Route != nil {
		data["plan"] = v.Route.PlanYAML
		if v.Route.Kind != "" {
			data["route"] = map[string]any{"kind": v.Route.Kind, "id": v.Route.ID}
		}
		data["llm_calls"] = v.Route.LLMCalls
		if v.Route.Plan == nil {
			data["closest"] = nonNilStrings(v.Route.Closest)
		}
	}
	if v.Report != nil {
		data["gaps"] = v.Report.Gaps
		data["policy"] = v.Report.Policy
	}
	if v.Result != nil {
		data["result"] = v.Result
	}
	b := envelope.NewBuilder(id)
	status := v.Status
	if v.DryRun {
		status = preflight.Ready
	}
	code, exit := StatusExit(status)
	msg := fmt.Sprintf("%s: %s", verdict, v.Message)
	var env envelope.Envelope
	if exit == 0 {
		env = b.Succeed(msg, data)
	} else {
		for _, m := range missing {
			b.Error("missing", fmt.Sprintf("%s · %s: %s", m.StepID, m.Capability, m.Reason), "")
		}
		if len(missing) == 0 {
			b.Error("planning", v.Message, "")
		}
		env = b.FailWithExit(code, exit, msg, data)
	}
	a.set(env, func(w io.Writer) { printVerdict(w, v, verdict, done, planned, missing) })
}
