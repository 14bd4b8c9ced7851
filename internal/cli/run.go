package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/runctl"
	"github.com/capflow/capflow/internal/telemetry"
	"github.com/capflow/capflow/internal/temporalx"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/internal/whatnext"
	"github.com/capflow/capflow/internal/yamldoc"
)

// NewWorkflowID is capflow-<plan>-<8 hex>.
func NewWorkflowID(planName string) string { return runctl.NewWorkflowID(planName) }

// loadPlanFile parses a plan and returns it with its raw value (sent to
// the workflow as the user wrote it).
func loadPlanFile(file string) (*plan.Plan, any, caperr.Problems, error) {
	data, err := readPlanFile(file)
	if err != nil {
		return nil, nil, caperr.Problems{asError(err)}, nil
	}
	p, probs := plan.Parse(file, data)
	if len(probs) > 0 {
		return nil, nil, probs, nil
	}
	doc, _ := yamldoc.Parse(file, data)
	return p, doc.Root.Interface(), nil, nil
}

func planProps(p *plan.Plan) map[string]any {
	out := map[string]any{}
	for k, v := range p.Inputs {
		out[k] = v
	}
	return out
}

// staticDetails is the run's description in the Web UI.
func staticDetails(p *plan.Plan) string {
	var b strings.Builder
	if p.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", p.Description)
	}
	fmt.Fprintf(&b, "failure policy: %s\n\n", p.FailurePolicy)
	for _, s := range p.Order() {
		deps := ""
		if len(s.Deps) > 0 {
			deps = " ← " + strings.Join(s.Deps, ", ")
		}
		fmt.Fprintf(&b, "- **%s** · %s%s\n", s.ID, s.Capability, deps)
	}
	return b.String()
}

// dial connects to Temporal as the configuration says; the CLI reaches it
// only through the client package.
func (a *App) dial(ctx context.Context) (*config.Config, *capflowclient.Client, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	if a.tracing == nil {
		if a.tracing, err = telemetry.Setup(cfg.Telemetry, "capflow"); err != nil {
			return cfg, nil, err
		}
	}
	tc, err := temporalx.Dial(ctx, cfg, a.log.Named("temporal"), a.tracing.ClientOption())
	if err != nil {
		return cfg, nil, err
	}
	return cfg, capflowclient.New(tc, cfg.Temporal.TaskQueue, capflowclient.WithConverters(temporalx.DataConverter(), temporalx.FailureConverter())), nil
}

func (a *App) runCommand() *cobra.Command {
	var inputs []string
	var inputsFile, id string
	var detach, rerun bool
	c := &cobra.Command{
		Use:   "run PLAN",
		Short: "Start a plan on Temporal and wait for it with live progress (--detach: print the ID and return)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			const cid = "capflow-run"
			p, value, probs, err := loadPlanFile(args[0])
			if err != nil {
				return err
			}
			if len(probs) > 0 {
				a.refuseRun(cid, preflight.InvalidReport(args[0], probs))
				return nil
			}
			given, err := parseInputs(inputs, inputsFile, planProps(p))
			if err != nil {
				return err
			}
			// A run that could not start is not started: no workflow, no
			// run folder, no report that says nothing ran.
			if _, _, probs := p.ResolveInputs(given, true); len(probs) > 0 {
				a.refuseRun(cid, preflight.InvalidInputsReport(p.Name, probs))
				return nil
			}
			// What plan check refuses is not started either: every problem,
			// positioned, the same exit (issue 54: a with: typo ended
			// invalid after its workflow started).
			ck, err := a.check(args[0], inputs, inputsFile, false)
			if err != nil && caperr.CodeOf(err) == caperr.ConfigError {
				return err
			}
			if err == nil && ck.report.Status != preflight.Ready {
				a.refuseRun(cid, ck.report)
				return nil
			}
			local := ""
			if err == nil {
				local = ck.report.Status
			}
			a.localCheck = func() string { return local }
			ctx, stop := context.WithCancel(a.ctx)
			defer stop()
			cfg, tc, err := a.dial(ctx)
			if err != nil {
				return err
			}
			defer tc.Close()
			if id == "" {
				id = NewWorkflowID(p.Name)
			} else if err := runctl.CheckID(id); err != nil {
				return err
			}
			in, err := planInput(cfg.Root, args[0], value, given)
			if err != nil {
				return err
			}
			return a.startRun(ctx, cfg, tc, cid, capflowclient.StartOptions{
				ID: id, Summary: fmt.Sprintf("plan %s · %d steps", p.Name, len(p.Steps)), Details: staticDetails(p), Rerun: rerun,
			}, in, detach)
		},
	}
	c.Flags().StringArrayVar(&inputs, "input", nil, "a plan input as NAME=VALUE (repeatable)")
	c.Flags().StringVar(&inputsFile, "inputs-file", "", "a YAML or JSON file of plan inputs")
	c.Flags().StringVar(&id, "id", "", "workflow ID (default capflow-<plan>-<random>)")
	c.Flags().BoolVar(&detach, "detach", false, "print the workflow ID and return without waiting")
	c.Flags().BoolVar(&rerun, "rerun", false, "with --id of a run that ended: start it again (without it, that run is reported)")
	c.Flags().BoolVarP(&a.verbose, "verbose", "v", false, "also print the tools' stderr lines as they come")
	return c
}

// refuseRun answers a run that is not started with its check's report.
func (a *App) refuseRun(cid string, rep *preflight.Report) {
	cfg, _ := a.loadConfig()
	root := "."
	if cfg != nil {
		root = cfg.Root
	}
	env := reportEnvelope(cid, rep, nil)
	env.Message += " (nothing was started)"
	a.set(env, func(w io.Writer) {
		prettyReport(w, root, rep, a.outputPath)
		fmt.Fprintln(w, "nothing was started: capflow run starts a plan once its check passes")
	})
}

// startRun starts a PlanWorkflow and follows it to its result (or, with
// detach, prints its ID and returns).
func (a *App) startRun(ctx context.Context, cfg *config.Config, tc *capflowclient.Client, cid string, opts capflowclient.StartOptions, in wfapi.Input, detach bool) error {
	run, err := tc.StartWith(ctx, opts, in)
	if err != nil {
		return caperr.Wrap(caperr.DependencyUnavailable, err, "cannot start the run")
	}
	url := temporalx.RunURL(cfg.Temporal, run.ID, run.RunID)
	verb := "started"
	if run.Existing {
		// The same ID asked again: that run is the answer (--rerun starts
		// a new one once it ended).
		verb = "exists already: nothing new started (--rerun starts it again once it ended);"
	}
	if detach {
		status := string(wfapi.StatusRunning)
		if run.Existing {
			if info, err := tc.Describe(ctx, run.ID); err == nil && info.Status != "" {
				status = info.Status
			}
		}
		env := envelope.NewBuilder(cid).Succeed(verb+" "+run.ID, map[string]any{"workflow_id": run.ID, "run_id": run.RunID, "url": url, "status": status, "existing": run.Existing})
		a.set(env, func(w io.Writer) {
			fmt.Fprintf(w, "%s %s\n  Web UI: %s\n  follow: capflow status %s\n", verb, run.ID, url, run.ID)
		})
		return nil
	}
	fmt.Fprintf(a.Stderr, "▶ %s %s\n  Web UI: %s\n", run.ID, verb, url)
	defer a.warnNoWorker(ctx, tc, "", "")()
	// Follow the run, not this execution: a long run continues as new.
	res, err := a.follow(ctx, tc.Get(run.ID))
	if err != nil {
		a.set(failEnv(cid, err, map[string]any{"workflow_id": run.ID, "run_id": run.RunID, "url": url}), nil)
		return nil
	}
	a.verdictsDiffer(res)
	a.setResult(cid, res, url)
	return nil
}

// dependencyGap is the first dependency_unavailable gap's message ("":
// none): what the worker's machine lacks.
func dependencyGap(gaps []capflowclient.Gap) string {
	for _, g := range gaps {
		if g.Reason == capflowclient.GapDependencyUnavailable {
			return g.ReasonMessage
		}
	}
	return ""
}

// verdictsDiffer warns when the worker refused a plan this project finds
// ready: the worker resolves against its own project, which may not be
// this one (another folder, other kits, another policy).
func (a *App) verdictsDiffer(res *capflowclient.Result) {
	refused := res.Status == wfapi.StatusPartialComplete || res.Status == wfapi.StatusBlockedByPolicy || res.Status == wfapi.StatusInvalid
	if !refused || a.localCheck == nil {
		return
	}
	if local := a.localCheck(); local == preflight.Ready {
		msg := fmt.Sprintf("this project's check finds the plan ready, the worker's says %s: the worker resolves against its own project and environment (a dependency it lacks, such as an environment variable, a binary or a service; or another folder: capflow-worker --project, or run with --task-queue of a worker that serves this one)", res.Status)
		if d := dependencyGap(res.Gaps); d != "" {
			msg = fmt.Sprintf("this project's check finds the plan ready, the worker's says %s: the worker lacks what a tool needs (%s); give it to the worker (an environment variable takes a restart)", res.Status, d)
		}
		a.phases = append(a.phases, envelope.Feedback{Phase: "check", Level: envelope.LevelWarning, Message: msg, Timestamp: envelope.Timestamp(envelope.Now())})
		fmt.Fprintf(a.Stderr, "⚠ %s\n", msg)
	}
}

// MaxPlanValueBytes is the largest plan sent as the workflow input
// itself; a larger one is sent as its path in the project, which workers
// read (Temporal refuses inputs over 2 MB and warns from 512 KB).
const MaxPlanValueBytes = 256 << 10

// planInput is the workflow input for a plan file: the plan itself, or
// its path when it is too large to travel in history.
func planInput(root, file string, value any, inputs map[string]any) (wfapi.Input, error) {
	raw, err := json.Marshal(value)
	if err != nil {
		return wfapi.Input{}, caperr.Wrap(caperr.InvalidInput, err, "%s cannot be sent as JSON", file)
	}
	if len(raw) <= MaxPlanValueBytes {
		return wfapi.Input{Plan: value, Inputs: inputs}, nil
	}
	rootAbs, _ := filepath.Abs(root)
	abs, _ := filepath.Abs(file)
	rel, err := filepath.Rel(rootAbs, abs)
	if err == nil {
		_, err = plan.InProject(rootAbs, rel)
	}
	if err != nil {
		return wfapi.Input{}, caperr.New(caperr.InvalidInput, "%s is %d KB, too large to send as the workflow input: put it inside the project (%s), where workers read it", file, len(raw)>>10, rootAbs).At(file, 0, 0, "")
	}
	return wfapi.Input{PlanFile: filepath.ToSlash(rel), Inputs: inputs}, nil
}

// setResult turns a workflow result into the command's envelope.
func (a *App) setResult(id string, res *capflowclient.Result, url string) {
	b := envelope.NewBuilder(id)
	code, exit := StatusExit(string(res.Status))
	msg := fmt.Sprintf("%s %s: %s", res.Plan, res.Status, res.Message)
	// The data is the workflow result itself, plus the Web UI link: what
	// schemas/workflow-result.schema.json describes.
	data := *res
	data.URL = url
	data.Next = whatnext.For(res)
	resultPhases(b, &data)
	var env envelope.Envelope
	if res.Status == wfapi.StatusRunning || res.Status == wfapi.StatusPaused {
		for _, l := range a.attempts {
			b.Info("attempt", l)
		}
		env = b.Succeed(fmt.Sprintf("%s is %s", res.WorkflowID, res.Status), data)
	} else if exit == 0 {
		env = b.Succeed(msg, data)
	} else {
		for _, s := range res.Steps {
			if s.Status == wfapi.StepFailed {
				b.Error("step", fmt.Sprintf("%s: %s", s.ID, s.Reason), "")
			}
		}
		for _, g := range res.Gaps {
			b.Error("gap", fmt.Sprintf("%s: %s", g.StepID, g.ReasonMessage), g.Reason)
		}
		env = b.FailWithExit(code, exit, msg, data)
		// A failed run is TOOL_FAILURE (exit 1, the contract's); its
		// cause is what failed it, and whether running again may help is
		// the cause's to say (a step's INVALID_INPUT is not retried).
		if c := whatnext.Cause(res); code == caperr.ToolFailure && env.Error != nil && c != "" && c != env.Error.Code {
			env.Error.Cause, env.Error.Retryable = c, caperr.Lookup(c).Retryable
		}
		if env.Error != nil && whatnext.Final(res) {
			env.Error.Retryable = false // its step's failure is final: a rerun meets it again
		}
	}
	attempts := a.attempts
	a.set(env, func(w io.Writer) {
		prettyResult(w, &data, url)
		for _, l := range attempts {
			fmt.Fprintf(w, "  ↳ %s\n", printable(l))
		}
	})
}

// runError turns a client error about run id into the contract's table:
// a run that is not there is the caller's input (exit 2).
func runError(id string, err error, what string) error { return runctl.RunError(id, err, what) }

// withClient dials Temporal for a command; a failure to connect is the
// command's error.
func (a *App) withClient(f func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error) error {
	ctx := a.ctx
	cfg, tc, err := a.dial(ctx)
	if err != nil {
		return err
	}
	defer tc.Close()
	return f(ctx, cfg, tc)
}
