package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/temporalx"
	"github.com/capflow/capflow/internal/wfapi"
)

// overlapPolicies are the --overlap values (Temporal's overlap policies).
var overlapPolicies = map[string]enumspb.ScheduleOverlapPolicy{
	"skip":            enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
	"buffer_one":      enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	"buffer_all":      enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	"cancel_other":    enumspb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER,
	"terminate_other": enumspb.SCHEDULE_OVERLAP_POLICY_TERMINATE_OTHER,
	"allow_all":       enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
}

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
				return caperr.New(caperr.InvalidInput, "--every %s: at least 1s", every).At("", 0, 0, "--every")
			}
			pol, ok := overlapPolicies[overlap]
			if !ok {
				return caperr.New(caperr.InvalidInput, "--overlap %q: one of %s", overlap, strings.Join(slices.Sorted(maps.Keys(overlapPolicies)), ", ")).At("", 0, 0, "--overlap")
			}
			// The same checks as `plan check`: a schedule of a plan that
			// cannot run would only fail on every tick.
			ck, err := a.check(file, inputs, inputsFile, false)
			if err != nil {
				return err
			}
			if ck.report.Status != preflight.Ready {
				a.set(reportEnvelope(cid, ck.report, ck.reg.Warnings), func(w io.Writer) { prettyReport(w, ck.cfg.Root, ck.report) })
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
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc client.Client) error {
				in, err := planInput(cfg.Root, file, value, given)
				if err != nil {
					return err
				}
				spec := client.ScheduleSpec{}
				if cron != "" {
					spec.CronExpressions = []string{cron}
				} else {
					spec.Intervals = []client.ScheduleIntervalSpec{{Every: every}}
				}
				opts := client.ScheduleOptions{
					ID: name, Spec: spec, Overlap: pol, Paused: paused, Note: note,
					Memo: map[string]any{memoPlan: ck.plan.Name, memoPlanFile: file},
					Action: &client.ScheduleWorkflowAction{
						ID: name, Workflow: wfapi.WorkflowType, Args: []any{in}, TaskQueue: cfg.Temporal.TaskQueue,
						StaticSummary: fmt.Sprintf("plan %s · %d steps · schedule %s", ck.plan.Name, len(ck.plan.Steps), name),
						StaticDetails: staticDetails(ck.plan),
					},
				}
				h, err := tc.ScheduleClient().Create(ctx, opts)
				if err != nil {
					return scheduleError(name, err)
				}
				d, err := h.Describe(ctx)
				if err != nil {
					return scheduleError(name, err)
				}
				row := scheduleRow(name, d.Schedule.Spec, d.Schedule.State.Paused, d.Schedule.State.Note, d.Info.NextActionTimes, d.Info.RecentActions, ck.plan.Name, file)
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
	c.Flags().StringVar(&overlap, "overlap", "skip", "when a run is still going at the next time: "+strings.Join(slices.Sorted(maps.Keys(overlapPolicies)), ", "))
	c.Flags().StringVar(&note, "note", "", "a note kept with the schedule")
	c.Flags().BoolVar(&paused, "paused", false, "create it paused (unpause in the Web UI or with the temporal CLI)")
	return c
}

func (a *App) scheduleList() *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "The schedules in the namespace that start capflow plans", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc client.Client) error {
				it, err := tc.ScheduleClient().List(ctx, client.ScheduleListOptions{PageSize: 100})
				if err != nil {
					return caperr.Wrap(caperr.DependencyUnavailable, err, "list schedules")
				}
				rows := []map[string]any{}
				dc := temporalx.DataConverter()
				for it.HasNext() {
					e, err := it.Next()
					if err != nil {
						return caperr.Wrap(caperr.DependencyUnavailable, err, "list schedules")
					}
					if e.WorkflowType.Name != wfapi.WorkflowType {
						continue
					}
					var planName, file string
					if m := e.Memo.GetFields(); m != nil {
						// Memos go through the codec (encrypted when a key is set).
						_ = dc.FromPayload(m[memoPlan], &planName)
						_ = dc.FromPayload(m[memoPlanFile], &file)
					}
					rows = append(rows, scheduleRow(e.ID, e.Spec, e.Paused, e.Note, e.NextActionTimes, e.RecentActions, planName, file))
				}
				sort.Slice(rows, func(i, j int) bool { return fmt.Sprint(rows[i]["name"]) < fmt.Sprint(rows[j]["name"]) })
				env := envelope.NewBuilder("capflow-schedule-list").Succeed(fmt.Sprintf("%d schedule(s)", len(rows)), map[string]any{"schedules": rows})
				a.set(env, func(w io.Writer) {
					var t [][]string
					for _, r := range rows {
						t = append(t, []string{fmt.Sprint(r["name"]), fmt.Sprint(r["plan"]), fmt.Sprint(r["spec"]), fmt.Sprint(r["next_run"]), fmt.Sprint(r["last_run"]), fmt.Sprint(r["paused"])})
					}
					table(w, []string{"SCHEDULE", "PLAN", "WHEN", "NEXT", "LAST RUN", "PAUSED"}, t)
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
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc client.Client) error {
				if err := tc.ScheduleClient().GetHandle(ctx, args[0]).Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
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
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc client.Client) error {
				if err := tc.ScheduleClient().GetHandle(ctx, args[0]).Delete(ctx); err != nil {
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
func scheduleRow(name string, spec *client.ScheduleSpec, paused bool, note string, next []time.Time, recent []client.ScheduleActionResult, planName, file string) map[string]any {
	row := map[string]any{"name": name, "plan": planName, "plan_file": file, "spec": describeSpec(spec), "paused": paused, "note": note, "next_run": "", "last_run": ""}
	if len(next) > 0 {
		row["next_run"] = envelope.Timestamp(next[0])
	}
	if n := len(recent); n > 0 {
		if r := recent[n-1].StartWorkflowResult; r != nil {
			row["last_run"] = r.WorkflowID
		}
	}
	return row
}

func describeSpec(s *client.ScheduleSpec) string {
	if s == nil {
		return ""
	}
	var parts []string
	parts = append(parts, s.CronExpressions...)
	for _, iv := range s.Intervals {
		parts = append(parts, "every "+iv.Every.String())
	}
	for _, c := range s.Calendars {
		// The server turns cron expressions into calendar specs.
		parts = append(parts, calendarText(c))
	}
	return strings.Join(parts, "; ")
}

// calendarText prints a calendar spec back as the cron fields it came from
// (minute hour day-of-month month day-of-week).
func calendarText(c client.ScheduleCalendarSpec) string {
	field := func(rs []client.ScheduleRange, all string) string {
		if len(rs) == 0 {
			return all
		}
		var out []string
		for _, r := range rs {
			switch {
			case r.End > r.Start && r.Step > 1:
				out = append(out, fmt.Sprintf("%d-%d/%d", r.Start, r.End, r.Step))
			case r.End > r.Start:
				out = append(out, fmt.Sprintf("%d-%d", r.Start, r.End))
			default:
				out = append(out, fmt.Sprint(r.Start))
			}
		}
		return strings.Join(out, ",")
	}
	full := func(rs []client.ScheduleRange, lo, hi int) string {
		if len(rs) == 1 && rs[0].Start == lo && rs[0].End == hi && rs[0].Step <= 1 {
			return "*"
		}
		return field(rs, "*")
	}
	return strings.Join([]string{full(c.Minute, 0, 59), full(c.Hour, 0, 23), full(c.DayOfMonth, 1, 31), full(c.Month, 1, 12), full(c.DayOfWeek, 0, 6)}, " ")
}

// scheduleError turns the server's answer into a contract error: a
// missing or existing schedule, or a spec it refused, is the user's input.
func scheduleError(name string, err error) error {
	var nf *serviceerror.NotFound
	var bad *serviceerror.InvalidArgument
	switch {
	case errors.As(err, &nf):
		return caperr.New(caperr.InvalidInput, "no schedule %q (capflow schedule list shows them)", name).At("", 0, 0, "NAME")
	case errors.Is(err, temporal.ErrScheduleAlreadyRunning):
		return caperr.New(caperr.InvalidInput, "a schedule %q already exists: delete it first, or choose another name", name).At("", 0, 0, "NAME")
	case errors.As(err, &bad):
		return caperr.New(caperr.InvalidInput, "schedule %s refused by Temporal: %s", name, bad.Message).At("", 0, 0, "--cron")
	}
	return caperr.Wrap(caperr.DependencyUnavailable, err, "schedule %s", name)
}
