package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/runctl"
	"github.com/capflow/capflow/internal/suggest"
	"github.com/capflow/capflow/internal/temporalx"
	"github.com/capflow/capflow/internal/wfapi"
)

// Run control (docs/run-control.md): each command sends one Temporal
// Update to the run; the workflow's validator refuses what would change
// nothing (exit 2, the reason), and an accepted update answers what
// changed.

func (a *App) controlCommands() []*cobra.Command {
	var by string
	byFlag := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVar(&by, "by", "", "who decides (default: the OS user)")
		return c
	}
	pause := &cobra.Command{
		Use: "pause ID", Short: "Pause a run: no step or item starts until resume; running steps finish", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.control("capflow-pause", args[0], wfapi.UpdatePause, "", struct {
				By string `json:"by"`
			}{operator(by)})
		},
	}
	resume := &cobra.Command{
		Use: "resume ID", Short: "Resume a paused run", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.control("capflow-resume", args[0], wfapi.UpdateResume, "", struct {
				By string `json:"by"`
			}{operator(by)})
		},
	}
	var reject bool
	var comment, timeout, proposal string
	approve := &cobra.Command{
		Use: "approve ID STEP", Short: "Answer a flow.approve step (--reject refuses it: the step fails with REJECTED)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			act := wfapi.ActionApprove
			if reject {
				act = wfapi.ActionReject
			}
			return a.decide("capflow-approve", args[0], wfapi.DecideRequest{Step: args[1], Action: act, By: operator(by), Comment: comment, Proposal: proposal})
		},
	}
	approve.Flags().BoolVar(&reject, "reject", false, "refuse instead of approving")
	approve.Flags().StringVar(&proposal, "proposal", "", "an agent step's gate: the proposal's digest its prompt shows (12 hex digits or more)")
	approve.Flags().StringVar(&comment, "comment", "", "a comment kept with the decision")
	decision := func(act wfapi.Action, short string) *cobra.Command {
		c := &cobra.Command{
			Use: string(act) + " ID STEP", Short: short, Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				req := wfapi.DecideRequest{Step: args[1], Action: act, By: operator(by), Comment: comment}
				if act == wfapi.ActionRetry && timeout != "" {
					if err := runctl.CheckTimeout(timeout); err != nil {
						return err
					}
					req.Timeout = timeout
				}
				return a.decide("capflow-"+string(act), args[0], req)
			},
		}
		c.Flags().StringVar(&comment, "comment", "", "a comment kept with the decision")
		if act == wfapi.ActionRetry {
			c.Flags().StringVar(&timeout, "timeout", "", "a longer start-to-close timeout for the retried attempt (e.g. 10m)")
		}
		return byFlag(c)
	}
	return []*cobra.Command{byFlag(pause), byFlag(resume), byFlag(approve),
		decision(wfapi.ActionRetry, "Run a step that waits after a failure again"),
		decision(wfapi.ActionSkip, "Skip a step that waits after a failure (its failure is absorbed)"),
		decision(wfapi.ActionFail, "Fail a step that waits after a failure"),
		a.runsCommand(), a.rerunCommand()}
}

// operator is who decides: --by, else the OS user.
func operator(by string) string {
	if by != "" {
		return by
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// decide sends a decision under the update ID that names the wait it
// answers (capflowclient.Run.DecideOnce), so a repeated call (a retried
// command, a second operator) is the same decision, never a second.
func (a *App) decide(cid, id string, req wfapi.DecideRequest) error {
	return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
		return a.watched(ctx, tc, id, req.Step, func() error {
			ans, err := tc.Get(id).DecideOnce(ctx, req)
			return a.answered(cfg, cid, id, ans, err)
		})
	})
}

func (a *App) control(cid, id, name, updateID string, arg any) error {
	return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
		return a.watched(ctx, tc, id, "", func() error {
			ans, err := tc.Get(id).Update(ctx, name, updateID, arg)
			return a.answered(cfg, cid, id, ans, err)
		})
	})
}

// watched sends a run-control request: at once refused when the run has
// ended (its result, which needs no worker, says what step was decided),
// else sent while warning on stderr if no worker polls the run's queue (a
// request waits for one: it said nothing for minutes).
func (a *App) watched(ctx context.Context, tc *capflowclient.Client, id, step string, send func() error) error {
	info, err := tc.Describe(ctx, id)
	if err != nil {
		return send() // the request's own error says it best
	}
	if !info.Open {
		reason := fmt.Sprintf("run %s has ended", id)
		if res, err := tc.GetRun(id, info.RunID).Wait(ctx); err == nil && step != "" {
			if why := res.Decided(step); why != "" {
				reason += "; " + why
			}
		}
		return runctl.Ended(id, step, reason)
	}
	defer a.warnNoWorker(ctx, tc, info.TaskQueue, "the request is answered once a worker takes the run")()
	return send()
}

// answered sets the envelope of a run-control request's answer.
func (a *App) answered(cfg *config.Config, cid, id string, ans *capflowclient.ControlAnswer, err error) error {
	if err != nil {
		return updateError(id, err)
	}
	url := temporalx.RunURL(cfg.Temporal, id, "")
	env := envelope.NewBuilder(cid).Succeed(ans.Message, map[string]any{"workflow_id": id, "status": ans.Status, "step": ans.Step, "state": ans.State, "url": url})
	a.set(env, func(w io.Writer) { fmt.Fprintf(w, "✓ %s\n  run %s is %s\n", ans.Message, id, ans.Status) })
	return nil
}

// updateError turns what Temporal says into the contract's table: a
// request the run refused, or a run that is not there or has ended, is the
// caller's (exit 2); a server that cannot be reached is not.
func updateError(id string, err error) error { return runctl.UpdateError(id, err) }

func (a *App) runsCommand() *cobra.Command {
	var status, planName, schedule string
	var limit int
	c := &cobra.Command{
		Use: "runs", Short: "Recent runs, newest first, from Temporal visibility (--status, --plan, --schedule, --limit)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if status != "" && !slices.Contains(capflowclient.RunStatuses, capflowclient.RunStatus(status)) {
				known := make([]string, len(capflowclient.RunStatuses))
				for i, s := range capflowclient.RunStatuses {
					known[i] = string(s)
				}
				return caperr.New(caperr.InvalidInput, "%q is not a run status (%s)%s", status, strings.Join(known, ", "), suggest.Phrase(status, known)).At("", 0, 0, "--status")
			}
			if limit < 1 || limit > 1000 {
				return caperr.New(caperr.InvalidInput, "%d is not between 1 and 1000", limit).At("", 0, 0, "--limit")
			}
			where, err := capflowclient.Where(map[string]string{
				capflowclient.SearchAttrStatus: status, capflowclient.SearchAttrPlan: planName, capflowclient.SearchAttrSchedule: schedule})
			if err != nil {
				return caperr.Wrap(caperr.InvalidInput, err, "")
			}
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				runs, err := tc.List(ctx, where, limit)
				if err != nil {
					return caperr.Wrap(caperr.DependencyUnavailable, err, "list runs")
				}
				rows := make([]map[string]any, 0, len(runs))
				for _, r := range runs {
					rows = append(rows, runRow(r))
				}
				env := envelope.NewBuilder("capflow-runs").Succeed(fmt.Sprintf("%d run(s)", len(rows)), map[string]any{"runs": rows, "query": capflowclient.ListQuery(where)})
				a.set(env, func(w io.Writer) {
					var table2 [][]string
					for _, r := range rows {
						table2 = append(table2, []string{fmt.Sprint(r["workflow_id"]), fmt.Sprint(r["plan"]), fmt.Sprint(r["status"]), fmt.Sprint(r["started_at"]), fmt.Sprint(r["ended_at"]), fmt.Sprint(r["schedule"])})
					}
					none := "no runs yet in this namespace"
					if where != "" {
						none = "no runs match --status/--plan (the query: " + capflowclient.ListQuery(where) + ")"
					}
					tableOr(w, none, []string{"RUN", "PLAN", "STATUS", "STARTED", "ENDED", "SCHEDULE"}, table2)
				})
				return nil
			})
		},
	}
	c.Flags().StringVar(&status, "status", "", "only runs in this status (running, paused, passed, failed, cancelled, ...)")
	c.Flags().StringVar(&planName, "plan", "", "only runs of this plan")
	c.Flags().StringVar(&schedule, "schedule", "", "only runs started by this schedule")
	c.Flags().IntVar(&limit, "limit", 20, "at most this many runs")
	return c
}

// runRow is one run in `capflow runs`: its search attributes say the plan
// and capflow's status (Temporal's, once the execution did not complete).
func runRow(r capflowclient.RunInfo) map[string]any {
	row := map[string]any{"workflow_id": r.ID, "run_id": r.RunID, "plan": r.Plan, "status": r.Status, "schedule": r.Schedule,
		"started_at": envelope.Timestamp(r.StartedAt), "ended_at": ""}
	if r.Status == "" || (r.Execution != "completed" && r.Execution != "running") {
		row["status"] = r.Execution
	}
	if !r.EndedAt.IsZero() {
		row["ended_at"] = envelope.Timestamp(r.EndedAt)
	}
	return row
}

func (a *App) rerunCommand() *cobra.Command {
	var from, newID string
	var detach bool
	c := &cobra.Command{
		Use:   "rerun ID",
		Short: "A new run of an ended run's plan and inputs, reusing the steps that succeeded (--from STEP runs STEP and what follows again)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				in, opts, prev, err := runctl.Rerun(ctx, tc, id, from, newID)
				if err != nil {
					return err
				}
				if opts.ID == "" {
					opts.ID = NewWorkflowID(prev.Plan)
				}
				return a.startRun(ctx, cfg, tc, "capflow-rerun", opts, in, detach)
			})
		},
	}
	c.Flags().StringVar(&from, "from", "", "run this step and everything downstream of it again")
	c.Flags().StringVar(&newID, "id", "", "the new run's workflow ID (default capflow-<plan>-<random>)")
	c.Flags().BoolVar(&detach, "detach", false, "print the new run's ID and return without waiting")
	return c
}
