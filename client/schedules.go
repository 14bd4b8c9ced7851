package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Schedules run a plan on a timetable (Temporal Schedules); the runs a
// schedule starts are named NAME-<time>.

// overlaps are the overlap policies by name.
var overlaps = map[string]enumspb.ScheduleOverlapPolicy{
	"skip":            enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
	"buffer_one":      enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	"buffer_all":      enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	"cancel_other":    enumspb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER,
	"terminate_other": enumspb.SCHEDULE_OVERLAP_POLICY_TERMINATE_OTHER,
	"allow_all":       enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
}

// OverlapPolicies names what a schedule may do when a run is still going
// at its next time.
func OverlapPolicies() []string { return slices.Sorted(maps.Keys(overlaps)) }

// ScheduleOptions create a schedule: exactly one of Cron and Every.
type ScheduleOptions struct {
	Name    string
	Cron    string
	Every   time.Duration
	Overlap string // one of OverlapPolicies; "" is skip
	Paused  bool
	Note    string
	// Memo: strings kept with the schedule (List returns them).
	Memo  map[string]string
	Input Input
	// Summary and Details of its runs in the Web UI.
	Summary, Details string
}

// Schedule is one schedule of capflow plans.
type Schedule struct {
	Name   string
	Spec   string // "0 3 * * *" or "every 15m0s"
	Paused bool
	Note   string
	// NextRun is zero when none is planned; LastRun is the workflow ID of
	// its latest run ("" for none).
	NextRun time.Time
	LastRun string
	Memo    map[string]string
}

// Exists is a schedule name already taken.
type Exists struct{ Name string }

func (e *Exists) Error() string { return fmt.Sprintf("a schedule %q already exists", e.Name) }

// InvalidSchedule is a schedule refused, by the client or the server (a
// bad cron expression, say).
type InvalidSchedule struct {
	Name, Reason string
	Field        string // "cron", "overlap", or "" when the server said
}

func (e *InvalidSchedule) Error() string {
	return fmt.Sprintf("schedule %s is invalid: %s", e.Name, e.Reason)
}

// fiveFields checks a cron expression is standard five-field cron (or one
// of its @ shorthands): Temporal also takes a leading seconds field and a
// trailing year, and "*/5 * * * * *" would run every five seconds, not
// minutes, so anything else is refused rather than reinterpreted.
func fiveFields(cron string) error {
	if strings.HasPrefix(cron, "@") {
		switch cron {
		case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
			return nil
		}
		return fmt.Errorf("%q is not a cron shorthand (@yearly, @monthly, @weekly, @daily, @hourly)", cron)
	}
	if n := len(strings.Fields(cron)); n != 5 {
		return fmt.Errorf("%q has %d fields; cron here is five fields: minute hour day-of-month month day-of-week", cron, n)
	}
	return nil
}

// CreateSchedule creates a schedule and returns it as the server has it.
func (c *Client) CreateSchedule(ctx context.Context, o ScheduleOptions) (*Schedule, error) {
	pol, ok := overlaps[o.Overlap]
	if o.Overlap == "" {
		pol, ok = overlaps["skip"], true
	}
	if !ok {
		return nil, &InvalidSchedule{Name: o.Name, Field: "overlap", Reason: fmt.Sprintf("overlap %q is not one of %s", o.Overlap, strings.Join(OverlapPolicies(), ", "))}
	}
	spec := sdkclient.ScheduleSpec{}
	if o.Cron != "" {
		if err := fiveFields(o.Cron); err != nil {
			return nil, &InvalidSchedule{Name: o.Name, Field: "cron", Reason: err.Error()}
		}
		spec.CronExpressions = []string{o.Cron}
	} else {
		spec.Intervals = []sdkclient.ScheduleIntervalSpec{{Every: o.Every}}
	}
	memo := map[string]any{}
	for k, v := range o.Memo {
		memo[k] = v
	}
	var h sdkclient.ScheduleHandle
	err := c.withStartAttrs(func(attrs temporal.SearchAttributes) (err error) {
		h, err = c.tc.ScheduleClient().Create(ctx, sdkclient.ScheduleOptions{
			ID: o.Name, Spec: spec, Overlap: pol, Paused: o.Paused, Note: o.Note, Memo: memo,
			Action: &sdkclient.ScheduleWorkflowAction{ID: o.Name, Workflow: WorkflowType, Args: []any{o.Input}, TaskQueue: c.taskQueue,
				StaticSummary: o.Summary, StaticDetails: o.Details, TypedSearchAttributes: attrs},
		})
		return err
	})
	if err != nil {
		return nil, scheduleError(o.Name, err)
	}
	d, err := h.Describe(ctx)
	if err != nil {
		return nil, scheduleError(o.Name, err)
	}
	if o.Cron != "" && len(d.Info.NextActionTimes) == 0 {
		// A cron no date matches ("0 0 31 2 *": February 31st) would be a
		// schedule that silently never starts anything.
		_ = h.Delete(ctx)
		return nil, &InvalidSchedule{Name: o.Name, Field: "cron", Reason: fmt.Sprintf("cron %q never fires: no date matches it", o.Cron)}
	}
	s := schedule(o.Name, d.Schedule.Spec, d.Schedule.State.Paused, d.Schedule.State.Note, d.Info.NextActionTimes, d.Info.RecentActions)
	s.Memo = o.Memo
	return s, nil
}

// ListSchedules lists the schedules that start capflow plans, by name.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	it, err := c.tc.ScheduleClient().List(ctx, sdkclient.ScheduleListOptions{PageSize: 100})
	if err != nil {
		return nil, err
	}
	out := []Schedule{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		if e.WorkflowType.Name != WorkflowType {
			continue
		}
		s := schedule(e.ID, e.Spec, e.Paused, e.Note, e.NextActionTimes, e.RecentActions)
		s.Memo = map[string]string{}
		for k, p := range e.Memo.GetFields() {
			// Memos go through the codec (encrypted when a key is set).
			var v string
			if c.dc.FromPayload(p, &v) == nil {
				s.Memo[k] = v
			}
		}
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// TriggerSchedule starts one run of a schedule now (its overlap policy
// applies).
func (c *Client) TriggerSchedule(ctx context.Context, name string) error {
	return scheduleError(name, c.tc.ScheduleClient().GetHandle(ctx, name).Trigger(ctx, sdkclient.ScheduleTriggerOptions{}))
}

// DeleteSchedule deletes a schedule; the runs it started go on.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return scheduleError(name, c.tc.ScheduleClient().GetHandle(ctx, name).Delete(ctx))
}

func scheduleError(name string, err error) error {
	var bad *serviceerror.InvalidArgument
	switch {
	case err == nil:
		return nil
	case errors.Is(err, temporal.ErrScheduleAlreadyRunning):
		return &Exists{Name: name}
	case errors.As(err, &bad):
		return &InvalidSchedule{Name: name, Reason: bad.Message}
	}
	return notFound("schedule", name, err)
}

func schedule(name string, spec *sdkclient.ScheduleSpec, paused bool, note string, next []time.Time, recent []sdkclient.ScheduleActionResult) *Schedule {
	s := &Schedule{Name: name, Spec: specText(spec), Paused: paused, Note: note}
	if len(next) > 0 {
		s.NextRun = next[0]
	}
	if n := len(recent); n > 0 {
		if r := recent[n-1].StartWorkflowResult; r != nil {
			s.LastRun = r.WorkflowID
		}
	}
	return s
}

func specText(s *sdkclient.ScheduleSpec) string {
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
func calendarText(c sdkclient.ScheduleCalendarSpec) string {
	field := func(rs []sdkclient.ScheduleRange) string {
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
	full := func(rs []sdkclient.ScheduleRange, lo, hi int) string {
		if len(rs) == 0 || (len(rs) == 1 && rs[0].Start == lo && rs[0].End == hi && rs[0].Step <= 1) {
			return "*"
		}
		return field(rs)
	}
	return strings.Join([]string{full(c.Minute, 0, 59), full(c.Hour, 0, 23), full(c.DayOfMonth, 1, 31), full(c.Month, 1, 12), full(c.DayOfWeek, 0, 6)}, " ")
}
