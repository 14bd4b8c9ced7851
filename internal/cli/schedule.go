package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/preflight"
)

// scheduleName is what a schedule may be called: its runs are named
// <name>-<time>, so it follows the workflow ID rules capflow uses.
var scheduleName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

// Memo keys on a schedule: what `schedule list` shows of it.
const (
	memoPlan     = "capflow_plan"
	memoPlanFile = "capflow_plan_file"
)

func (a *App) scheduleCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "schedule",
		Short: "Run a plan on a timetable (Temporal Schedules): create, list, trigger, delete",
	}
	c.AddCommand(a.scheduleCreate(), a.scheduleList(), a.scheduleTrigger(), a.scheduleDelete())
	return c
}

func (a *App) scheduleCreate() *cobra.Command {
	var inputs []string
	var inputsFile, cron, overlap, note string
	var every time.Duration
	var paused bool
	c := &cobra.Command{
		Use:   "create NAME PLAN (--cron EXPR | --every DURATION)",
		Short: "Check a plan, then schedule it: its runs are named NAME-<time> and listed by `capflow runs --schedule NAME`",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			const cid = "capflow-schedule-create"
			name, file := args[0], args[1]
			if !scheduleName.MatchString(name) {
				return caperr.New(caperr.InvalidInput, "schedule name %q: use letters, digits, '.', '_' and '-' (at most 200, starting with a letter or digit)", name).At("", 0, 0, "NAME")
			}
			if (cron == "") == (every == 0) {
				return caperr.New(caperr.InvalidInput, "give exactly one of --cron EXPR or --every DURATION").At("", 0, 0, "--cron")
			}
			if every < 0 || (every > 0 && every < time.Second) {
				return caperr.New(caperr.InvalidInput, "%s is less than 1s", every).At("", 0, 0, "--every")
			}
			if !slices.Contains(capflowclient.OverlapPolicies(), overlap) {
				return caperr.New(caperr.InvalidInput, "%q is not one of %s", overlap, strings.Join(capflowclient.OverlapPolicies(), ", ")).At("", 0, 0, "--overlap")
			}
			// The same checks as `plan check`: a schedule of a plan that
			// cannot run would only fail on every tick.
			ck, err := a.check(file, inputs, inputsFile, false)
			if err != nil {
				return err
			}
			if ck.report.Status != preflight.Ready {
				a.set(reportEnvelope(cid, ck.report, ck.reg.Warnings), func(w io.Writer) { prettyReport(w, ck.cfg.Root, ck.report, a.outputPath) })
				return nil
			}
			_, value, _, err := loadPlanFile(file)
			if err != nil {
				return err
			}
			given, err := parseInputs(inputs, inputsFile, planProps(ck.plan))
			if err != nil {
				return err
			}
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				in, err := planInput(cfg.Root, file, value, given)
				if err != nil {
					return err
				}
				sc, err := tc.CreateSchedule(ctx, capflowclient.ScheduleOptions{
					Name: name, Cron: cron, Every: every, Overlap: overlap, Paused: paused, Note: note,
					Memo:    map[string]string{memoPlan: ck.plan.Name, memoPlanFile: file},
					Input:   in,
					Summary: fmt.Sprintf("plan %s · %d steps · schedule %s", ck.plan.Name, len(ck.plan.Steps), name),
					Details: staticDetails(ck.plan),
				})
				if err != nil {
					return scheduleError(name, err)
				}
				row := scheduleRow(*sc)
				row["overlap"] = overlap
				env := envelope.NewBuilder(cid).Succeed(fmt.Sprintf("schedule %s created: %s", name, row["spec"]), row)
				a.set(env, func(w io.Writer) {
					fmt.Fprintf(w, "schedule %s: plan %s, %s\n  next run: %s\n  runs: capflow runs --schedule %s\n", name, ck.plan.Name, row["spec"], row["next_run"], name)
				})
				return nil
			})
		},
	}
	c.Flags().StringVar(&cron, "cron", "", `when to run, as a cron expression ("0 3 * * *": every day at 03:00 UTC)`)
	c.Flags().DurationVar(&every, "every", 0, "run at this interval (e.g. 15m, 1h)")
	c.Flags().StringArrayVar(&inputs, "input", nil, "a plan input as NAME=VALUE (repeatable)")
	c.Flags().StringVar(&inputsFile, "inputs-file", "", "a YAML or JSON file of plan inputs")
	c.Flags().StringVar(&overlap, "overlap", "skip", "when a run is still going at the next time: "+strings.Join(capflowclient.OverlapPolicies(), ", "))
	c.Flags().StringVar(&note, "note", "", "a note kept with the schedule")
	c.Flags().BoolVar(&paused, "paused", false, "create it paused (unpause in the Web UI or with the temporal CLI)")
	return c
}

func (a *App) scheduleList() *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "The schedules in the namespace that start capflow plans", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				list, err := tc.ListSchedules(ctx)
				if err != nil {
					return caperr.Wrap(caperr.DependencyUnavailable, err, "list schedules")
				}
				rows := []map[string]any{}
				for _, sc := range list {
					rows = append(rows, scheduleRow(sc))
				}
				env := envelope.NewBuilder("capflow-schedule-list").Succeed(fmt.Sprintf("%d schedule(s)", len(rows)), map[string]any{"schedules": rows})
				a.set(env, func(w io.Writer) {
					var t [][]string
					for _, r := range rows {
						t = append(t, []string{fmt.Sprint(r["name"]), fmt.Sprint(r["plan"]), fmt.Sprint(r["spec"]), fmt.Sprint(r["next_run"]), fmt.Sprint(r["last_run"]), fmt.Sprint(r["paused"])})
					}
					tableOr(w, "no schedules start capflow plans in this namespace (capflow schedule create makes one)", []string{"SCHEDULE", "PLAN", "WHEN", "NEXT", "LAST RUN", "PAUSED"}, t)
				})
				return nil
			})
		},
	}
}

func (a *App) scheduleTrigger() *cobra.Command {
	return &cobra.Command{
		Use: "trigger NAME", Short: "Start one run of a schedule now (its overlap policy applies)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				if err := tc.TriggerSchedule(ctx, args[0]); err != nil {
					return scheduleError(args[0], err)
				}
				env := envelope.NewBuilder("capflow-schedule-trigger").Succeed("triggered "+args[0], map[string]any{"name": args[0]})
				a.set(env, func(w io.Writer) {
					fmt.Fprintf(w, "triggered %s; its run: capflow runs --schedule %s\n", args[0], args[0])
				})
				return nil
			})
		},
	}
}

func (a *App) scheduleDelete() *cobra.Command {
	return &cobra.Command{
		Use: "delete NAME", Short: "Delete a schedule (runs it started go on)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				if err := tc.DeleteSchedule(ctx, args[0]); err != nil {
					return scheduleError(args[0], err)
				}
				env := envelope.NewBuilder("capflow-schedule-delete").Succeed("deleted "+args[0], map[string]any{"name": args[0]})
				a.set(env, func(w io.Writer) { fmt.Fprintf(w, "deleted schedule %s\n", args[0]) })
				return nil
			})
		},
	}
}

// scheduleRow is one schedule as create and list print it.
func scheduleRow(sc capflowclient.Schedule) map[string]any {
	row := map[string]any{"name": sc.Name, "plan": sc.Memo[memoPlan], "plan_file": sc.Memo[memoPlanFile], "spec": sc.Spec,
		"paused": sc.Paused, "note": sc.Note, "next_run": "", "last_run": sc.LastRun}
	if !sc.NextRun.IsZero() {
		row["next_run"] = envelope.Timestamp(sc.NextRun)
	}
	return row
}

// scheduleError turns the server's answer into a contract error: a
// missing or existing schedule, or a spec it refused, is the user's input.
func scheduleError(name string, err error) error {
	var nf *capflowclient.NotFound
	var exists *capflowclient.Exists
	var bad *capflowclient.InvalidSchedule
	switch {
	case errors.As(err, &nf):
		return caperr.New(caperr.InvalidInput, "no schedule %q (capflow schedule list shows them)", name).At("", 0, 0, "NAME")
	case errors.As(err, &exists):
		return caperr.New(caperr.InvalidInput, "a schedule %q already exists: delete it first, or choose another name", name).At("", 0, 0, "NAME")
	case errors.As(err, &bad):
		field := "--cron"
		if bad.Field == "overlap" {
			field = "--overlap"
		}
		return caperr.New(caperr.InvalidInput, "schedule %s is invalid: %s", name, bad.Reason).At("", 0, 0, field)
	}
	return caperr.Wrap(caperr.DependencyUnavailable, err, "schedule %s", name)
}
