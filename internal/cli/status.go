package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/temporalx"
	"github.com/capflow/capflow/internal/wfapi"
)

// status, cancel and report: a run's progress or result, by ID.

func (a *App) statusCommand() *cobra.Command {
	var followRun bool
	c := &cobra.Command{
		Use:   "status ID",
		Short: "A run's progress (every step's state), or its result when it has ended (--follow: live until it ends)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				if followRun {
					if _, err := tc.Describe(ctx, args[0]); err != nil {
						return runError(args[0], err, "describe")
					}
					res, err := a.follow(ctx, tc.Get(args[0]))
					if err != nil {
						return err
					}
					a.setResult("capflow-status", res, temporalx.RunURL(cfg.Temporal, res.WorkflowID, res.RunID))
					return nil
				}
				res, err := a.fetch(ctx, tc, args[0], false)
				if err != nil {
					return err
				}
				a.setResult("capflow-status", res, temporalx.RunURL(cfg.Temporal, res.WorkflowID, res.RunID))
				return nil
			})
		},
	}
	c.Flags().BoolVar(&followRun, "follow", false, "follow the run live until it ends (step transitions, latest feedback, retries)")
	c.Flags().BoolVarP(&a.verbose, "verbose", "v", false, "with --follow, also print the tools' stderr lines as they come")
	return c
}

// fetch returns a run's result when it has ended, else its progress.
func (a *App) fetch(ctx context.Context, tc *capflowclient.Client, id string, wait bool) (*capflowclient.Result, error) {
	info, err := tc.Describe(ctx, id)
	if err != nil {
		return nil, runError(id, err, "describe")
	}
	run := tc.GetRun(id, info.RunID)
	if info.Open && !wait {
		// Only a worker answers the progress query: with none on the
		// run's queue it would time out after 10 s with gRPC's words.
		if n, err := tc.Pollers(ctx, info.TaskQueue); err == nil && n == 0 {
			return nil, caperr.Wrap(caperr.DependencyUnavailable, &capflowclient.NoWorker{ID: id, Queue: info.TaskQueue}, "")
		}
		p, err := run.ProgressNow(ctx)
		if errors.As(err, new(*capflowclient.NoWorker)) {
			return nil, caperr.Wrap(caperr.DependencyUnavailable, err, "")
		} else if err != nil {
			return nil, caperr.Wrap(caperr.DependencyUnavailable, err, "query %s (is a worker running?)", id)
		}
		if p.Status != wfapi.StatusPaused {
			p.Status = wfapi.StatusRunning
		}
		waitingHeadline(p)
		a.attempts = attemptLines(info.Pending, time.Now())
		return p, nil
	}
	res, err := run.Wait(ctx)
	if err != nil {
		return nil, caperr.Wrap(caperr.ToolFailure, err, "run %s ended with an error", id)
	}
	return res, nil
}

// attemptLines say where each running step's attempt is (PendingActivity.Line).
func attemptLines(pending []capflowclient.PendingActivity, now time.Time) []string {
	var out []string
	for _, pa := range pending {
		if pa.Step != "" {
			out = append(out, pa.Step+": "+pa.Line(now))
		}
	}
	return out
}

func (a *App) cancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a run: running tools are stopped, the report is still written",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				if err := tc.Get(args[0]).Cancel(ctx); err != nil {
					if errors.As(err, new(*capflowclient.NotFound)) {
						err = caperr.New(caperr.InvalidInput, "no running run with ID %q", args[0])
					}
					return err
				}
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				if info, err := tc.Describe(ctx, args[0]); err == nil {
					defer a.warnNoWorker(wctx, tc, info.TaskQueue, fmt.Sprintf("the run ends once one takes it; to end it with no worker (no cleanup, no report): temporal workflow terminate --workflow-id %s", args[0]))()
				}
				res, err := a.fetch(wctx, tc, args[0], true)
				if err != nil && ctx.Err() == nil {
					// Asked, and the server took it; the run winds down on
					// its own time (a step whose worker is gone has 30 s to
					// confirm). Not waiting any longer is no failure.
					why := "no worker wound it down within a minute: is one up?"
					if wctx.Err() == nil {
						why = err.Error()
					}
					msg := fmt.Sprintf("cancellation of %s requested; it has not ended yet (%s): capflow status %s says where it is", args[0], why, args[0])
					a.set(envelope.NewBuilder("capflow-cancel").Succeed(msg, map[string]any{"id": args[0], "ended": false}), nil)
					return nil
				}
				if err != nil {
					// Ctrl-C: the cancellation stands; only the wait ends.
					return caperr.New(caperr.Cancelled, "stopped waiting for %s to end; its cancellation is requested, and a worker winds it down (capflow status %s)", args[0], args[0])
				}
				a.setResult("capflow-cancel", res, temporalx.RunURL(cfg.Temporal, res.WorkflowID, res.RunID))
				return nil
			})
		},
	}
}

func (a *App) reportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "report ID",
		Short: "A finished run's result and its markdown report",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				info, err := tc.Describe(ctx, args[0])
				if err == nil && info.Open {
					return caperr.New(caperr.InvalidInput, "%s is still running; see capflow status %s", args[0], args[0])
				}
				res, err := a.fetch(ctx, tc, args[0], true)
				if err != nil {
					return err
				}
				a.setResult("capflow-report", res, temporalx.RunURL(cfg.Temporal, res.WorkflowID, res.RunID))
				if md := a.reportMarkdown(ctx, res); md != nil {
					a.result.pretty = func(w io.Writer) { fmt.Fprint(w, printableText(string(md))) }
				}
				return nil
			})
		},
	}
}

// reportMarkdown is a run's report.md: the file its result names, or, on
// another host than the run's, the copy in the project's shared store.
func (a *App) reportMarkdown(ctx context.Context, res *capflowclient.Result) []byte {
	if md, err := os.ReadFile(res.Report.Markdown); err == nil {
		return md
	}
	p, err := a.loadProject()
	if err != nil {
		return nil
	}
	md, err := p.RunReport(ctx, res.WorkflowID, res.Report.Markdown, 64<<20)
	if err != nil {
		return nil
	}
	return md
}

// waitingHeadline says, for a run whose steps wait for a person, which
// and how to answer: a run that waits is not just running.
func waitingHeadline(p *capflowclient.Result) {
	var waits []string
	for _, s := range p.Steps {
		if s.Status == wfapi.StepWaiting && s.Waiting != nil {
			waits = append(waits, fmt.Sprintf("%s waits for %s: %s (answer: %s)", s.ID, s.Waiting.Kind, printable(s.Waiting.Prompt), answerCommand(s.Waiting, p.WorkflowID, s.ID)))
		}
	}
	switch len(waits) {
	case 0:
	case 1:
		p.Message = waits[0]
	default:
		p.Message = fmt.Sprintf("%d steps wait for a person; %s", len(waits), waits[0])
	}
}
