package dag

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
)

// recorder is the test's driver: it starts whatever the machine says is
// ready and remembers what it was told.
type recorder struct {
	moves  []string
	halted []string
}

func (r *recorder) Moved(t Transition) {
	s := fmt.Sprintf("%s:%s>%s", t.ID, t.From, t.To)
	if t.Code != "" {
		s += "(" + string(t.Code) + ")"
	}
	r.moves = append(r.moves, s)
}

func (r *recorder) Halt(id string, was State) { r.halted = append(r.halted, id+":"+was.String()) }

// startReady starts every ready step, as a driver with room would.
func startReady(m *Machine) []string {
	var started []string
	for {
		id, ok := m.NextReady()
		if !ok {
			return started
		}
		m.Start(id)
		started = append(started, id)
	}
}

func dep(id string, deps ...string) Step {
	return Step{ID: id, Deps: deps, Join: plan.Join{Policy: plan.JoinAll}}
}

func joined(id string, j plan.Join, deps ...string) Step { return Step{ID: id, Deps: deps, Join: j} }

// event applies one scripted event: "ok a", "fail a CODE", "cause a CODE
// CAUSE" (a failure that summarises), "when a" (condition false),
// "cancel a", "stop why", "cancelrun".
func event(t *testing.T, m *Machine, ev string) {
	t.Helper()
	f := strings.Fields(ev)
	switch f[0] {
	case "ok":
		m.Succeed(f[1])
	case "fail":
		m.Fail(f[1], caperr.Code(f[2]), "", f[1]+" broke")
	case "cause":
		m.Fail(f[1], caperr.Code(f[2]), caperr.Code(f[3]), f[1]+" broke")
	case "when":
		m.SkipWhenFalse(f[1])
	case "cancel":
		m.Cancel(f[1], "cancelled")
	case "stop":
		m.Stop(strings.Join(f[1:], " "))
	case "cancelrun":
		m.CancelRun("the run was cancelled")
	default:
		t.Fatalf("unknown event %q", ev)
	}
}

func states(m *Machine) string {
	var out []string
	for _, id := range m.IDs() {
		out = append(out, id+"="+m.State(id).String())
	}
	return strings.Join(out, " ")
}

// Each row of docs/plans.md's "Joins and failure policies" table.
func TestJoinsAndPolicies(t *testing.T) {
	any1 := plan.Join{Policy: plan.JoinAny}
	q2 := plan.Join{Policy: plan.JoinQuorum, Min: 2}
	q66 := plan.Join{Policy: plan.JoinQuorum, Threshold: 0.66}
	fan := func(j plan.Join) []Step { return []Step{dep("a"), dep("b"), dep("c"), joined("d", j, "a", "b", "c")} }
	crit := func(s Step) Step { s.Critical = true; return s }
	skipOnFail := func(s Step) Step { s.OnFailure = plan.OnFailureSkip; return s }
	tests := []struct {
		name    string
		steps   []Step
		policy  string
		events  []string
		want    string // states after the events (and starting what is ready)
		verdict Verdict
		message string
	}{
		{"all: every dependency succeeds", fan(plan.Join{Policy: plan.JoinAll}), plan.ContinueAll,
			[]string{"ok a", "ok b", "ok c", "ok d"}, "a=succeeded b=succeeded c=succeeded d=succeeded", Passed, "all 4 steps succeeded"},
		{"all: one failure skips the join", fan(plan.Join{Policy: plan.JoinAll}), plan.ContinueAll,
			[]string{"ok a", "fail b TOOL_FAILURE", "ok c"}, "a=succeeded b=failed c=succeeded d=skipped", FailedRun, "step b failed: b broke (2 of 4 steps succeeded)"},
		{"any: one success is enough; the failure is absorbed", fan(any1), plan.FailFast,
			[]string{"fail a TOOL_FAILURE", "fail b TOOL_FAILURE", "ok c", "ok d"}, "a=failed b=failed c=succeeded d=succeeded", Passed, "2 of 4 steps succeeded; every failure was absorbed"},
		{"any: none succeeds, skipped QUORUM_NOT_MET, run fails", fan(any1), plan.FailFast,
			[]string{"fail a TOOL_FAILURE", "fail b TOOL_FAILURE", "fail c TOOL_FAILURE"}, "a=failed b=failed c=failed d=skipped", FailedRun, "step a failed: a broke (0 of 4 steps succeeded)"},
		{"quorum min 2 met", fan(q2), plan.FailFast,
			[]string{"ok a", "fail b TOOL_FAILURE", "ok c", "ok d"}, "a=succeeded b=failed c=succeeded d=succeeded", Passed, "3 of 4 steps succeeded; every failure was absorbed"},
		{"quorum min 2 can no longer be met", fan(q2), plan.FailFast,
			[]string{"fail a TOOL_FAILURE", "fail b TOOL_FAILURE"}, "a=failed b=failed c=running d=skipped", FailedRun, "step a failed: a broke (0 of 4 steps succeeded)"},
		{"quorum threshold 0.66 of 3 rounds up to 2", fan(q66), plan.ContinueAll,
			[]string{"ok a", "fail b TOOL_FAILURE", "fail c TOOL_FAILURE"}, "a=succeeded b=failed c=failed d=skipped", FailedRun, "step b failed: b broke (1 of 4 steps succeeded)"},
		{"fail_fast: the first failure stops the run", []Step{dep("a"), dep("b"), dep("c", "a")}, plan.FailFast,
			[]string{"fail b TOOL_FAILURE"}, "a=running b=failed c=skipped", FailedRun, "step b failed: b broke (0 of 3 steps succeeded)"},
		{"continue_all: what can run runs", []Step{dep("a"), dep("b"), dep("c", "a")}, plan.ContinueAll,
			[]string{"fail b TOOL_FAILURE", "ok a", "ok c"}, "a=succeeded b=failed c=succeeded", FailedRun, "step b failed: b broke (2 of 3 steps succeeded)"},
		{"critical_path: a non-critical failure is absorbed", []Step{crit(dep("a")), dep("b"), dep("c", "a")}, plan.CriticalPath,
			[]string{"fail b TOOL_FAILURE", "ok a", "ok c"}, "a=succeeded b=failed c=succeeded", Passed, "2 of 3 steps succeeded; every failure was absorbed"},
		{"critical_path: a critical failure stops the run", []Step{crit(dep("a")), dep("b"), dep("c", "b")}, plan.CriticalPath,
			[]string{"fail a TOOL_FAILURE"}, "a=failed b=running c=skipped", FailedRun, "step a failed: a broke (0 of 3 steps succeeded)"},
		{"critical_path: a critical step skipped fails the run", []Step{dep("a"), crit(dep("b", "a"))}, plan.CriticalPath,
			[]string{"fail a TOOL_FAILURE"}, "a=failed b=skipped", FailedRun, "step b skipped: join all needs 1 of 1 dependencies to succeed; a failed (0 of 2 steps succeeded)"},
		{"by_severity: a MEDIUM failure is a warning", []Step{dep("a"), dep("b", "a")}, plan.BySeverity,
			[]string{"fail a OBSERVABILITY_ERROR"}, "a=failed b=skipped", Passed, "0 of 2 steps succeeded; every failure was absorbed"},
		{"by_severity: CRITICAL stops the run", []Step{dep("a"), dep("b")}, plan.BySeverity,
			[]string{"fail a POLICY_BLOCKED"}, "a=failed b=running", FailedRun, "step a failed: a broke (0 of 2 steps succeeded)"},
		{"by_severity: retries exhausted take their cause's severity", []Step{dep("a"), dep("b")}, plan.BySeverity,
			[]string{"cause a RETRY_EXHAUSTED OBSERVABILITY_ERROR", "ok b"}, "a=failed b=succeeded", Passed, "1 of 2 steps succeeded; every failure was absorbed"},
		{"on_failure: skip is absorbed, dependents skipped", []Step{skipOnFail(dep("a")), dep("b", "a"), dep("c")}, plan.FailFast,
			[]string{"fail a TOOL_FAILURE", "ok c"}, "a=skipped b=skipped c=succeeded", Passed, "1 of 3 steps succeeded; every failure was absorbed"},
		{"when false is left out of the join", []Step{dep("a"), dep("b"), dep("c", "a", "b")}, plan.FailFast,
			[]string{"when a", "ok b", "ok c"}, "a=skipped b=succeeded c=succeeded", Passed, "all 2 steps that ran succeeded; 1 skipped by its condition"},
		{"a join over only false conditions is met", []Step{dep("a"), joined("b", any1, "a")}, plan.FailFast,
			[]string{"when a", "ok b"}, "a=skipped b=succeeded", Passed, "the one step that ran succeeded; 1 skipped by its condition"},
		{"a stop skips what has not started", []Step{dep("a"), dep("b", "a")}, plan.FailFast,
			[]string{"stop max_run_seconds", "cancel a"}, "a=cancelled b=skipped", Passed, ""},
		{"a cancelled run cancels what has not started", []Step{dep("a"), dep("b", "a")}, plan.FailFast,
			[]string{"cancelrun", "cancel a"}, "a=cancelled b=cancelled", CancelledRun, "the run was cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(tt.steps, tt.policy, &recorder{})
			m.Examine(m.IDs()...)
			startReady(m)
			for _, ev := range tt.events {
				event(t, m, ev)
				startReady(m)
			}
			if got := states(m); got != tt.want {
				t.Errorf("states\n got %s\nwant %s", got, tt.want)
			}
			v, msg := m.Outcome("")
			if v != tt.verdict || (tt.message != "" && msg != tt.message) {
				t.Errorf("outcome = %s %q, want %s %q", v, msg, tt.verdict, tt.message)
			}
			if err := m.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A stop halts running and waiting steps in id order (the order of the
// workflow's cancel commands), and only the first stop counts.
func TestStopHaltsInOrder(t *testing.T) {
	r := &recorder{}
	m := New([]Step{dep("c"), dep("a"), dep("b"), dep("d", "a")}, plan.FailFast, r)
	m.Examine(m.IDs()...)
	startReady(m)
	m.Wait("b", "waiting for approval")
	m.Fail("c", caperr.ToolFailure, "", "c broke")
	m.Stop("again")
	if want := []string{"a:running", "b:waiting"}; !reflect.DeepEqual(r.halted, want) {
		t.Errorf("halted %v, want %v", r.halted, want)
	}
	if got, want := states(m), "a=running b=cancelled c=failed d=skipped"; got != want {
		t.Errorf("states %s, want %s", got, want)
	}
	if _, why := m.Stopped(); why != "fail_fast: step c failed" {
		t.Errorf("stop reason %q", why)
	}
	if got := m.Reason("d"); got != "not started: fail_fast: step c failed" {
		t.Errorf("d's reason %q", got)
	}
}

func TestJoinSkipCarriesQuorumCode(t *testing.T) {
	r := &recorder{}
	m := New([]Step{dep("a"), joined("b", plan.Join{Policy: plan.JoinAny}, "a"), dep("c", "b")}, plan.ContinueAll, r)
	m.Examine(m.IDs()...)
	startReady(m)
	m.Fail("a", caperr.ToolFailure, "", "a broke")
	want := []string{"a:pending>running", "a:running>failed", "b:pending>skipped(QUORUM_NOT_MET)", "c:pending>skipped"}
	if !reflect.DeepEqual(r.moves, want) {
		t.Errorf("moves %v, want %v", r.moves, want)
	}
	if got := m.Reason("b"); got != "join any needs 1 of 1 dependencies to succeed; a failed" {
		t.Errorf("reason %q", got)
	}
	if got := m.JoinNote("b"); got != "" {
		t.Errorf("join note %q", got)
	}
}

func TestJoinNote(t *testing.T) {
	m := New([]Step{dep("a"), dep("b"), dep("c"), dep("e"), joined("d", plan.Join{Policy: plan.JoinQuorum, Min: 2}, "a", "b", "c", "e")}, plan.ContinueAll, &recorder{})
	m.Examine(m.IDs()...)
	startReady(m)
	for _, ev := range []string{"ok a", "fail b TOOL_FAILURE", "ok c", "ok e"} {
		event(t, m, ev)
	}
	if id, ok := m.NextReady(); !ok || id != "d" {
		t.Fatalf("ready %q %v", id, ok)
	}
	if got := m.JoinNote("d"); got != "quorum: 3/4 (75%) met, continuing" {
		t.Errorf("join note %q", got)
	}
}

// Recovery: a producer goes back to pending to re-create a lost output,
// its consumer waits for it; nothing is skipped meanwhile.
func TestRequeue(t *testing.T) {
	m := New([]Step{dep("a"), dep("b", "a"), dep("c", "b")}, plan.FailFast, &recorder{})
	m.Examine(m.IDs()...)
	startReady(m)
	m.Succeed("a")
	startReady(m)
	m.Requeue("b", "waiting for a to re-create its stored output")
	m.Requeue("a", "re-run")
	m.Start("a")
	m.Examine(m.Dependents("b")...)
	if got, want := states(m), "a=running b=pending c=pending"; got != want {
		t.Fatalf("states %s, want %s", got, want)
	}
	m.Succeed("a")
	if got := startReady(m); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("started %v", got)
	}
	m.Succeed("b")
	startReady(m)
	m.Succeed("c")
	if v, msg := m.Outcome(""); v != Passed || msg != "all 3 steps succeeded" {
		t.Errorf("outcome %s %q", v, msg)
	}
}

func TestInvalidTransitionIsTheRunsError(t *testing.T) {
	m := New([]Step{dep("a")}, plan.FailFast, &recorder{})
	m.Succeed("a") // never started
	v, msg := m.Outcome("")
	if v != FailedRun || msg != "internal error: step a: invalid transition pending → succeeded" {
		t.Errorf("outcome %s %q", v, msg)
	}
}

// A later segment restores what earlier ones ended.
func TestRestore(t *testing.T) {
	m := New([]Step{dep("a"), dep("b"), dep("c", "a", "b")}, plan.BySeverity, &recorder{})
	m.Restore("a", Failed, false, "a broke\nmore", caperr.ObservabilityError)
	m.Restore("b", Succeeded, false, "", "")
	m.Examine(m.IDs()...)
	if got := startReady(m); len(got) != 0 {
		t.Fatalf("started %v: c's join cannot be met", got)
	}
	if got, want := states(m), "a=failed b=succeeded c=skipped"; got != want {
		t.Errorf("states %s, want %s", got, want)
	}
	if got, want := m.Warnings(), []string{"MEDIUM a failed (OBSERVABILITY_ERROR): a broke"}; !reflect.DeepEqual(got, want) {
		t.Errorf("warnings %v, want %v", got, want)
	}
	if v, _ := m.Outcome("max_run_seconds (5s) exceeded"); v != FailedRun {
		t.Errorf("a timed-out run is failed, got %s", v)
	}
}

func TestItemsEnd(t *testing.T) {
	tally := func(states ...State) Tally {
		var t Tally
		for _, s := range states {
			t.Add(s)
		}
		return t
	}
	one := &plan.Tolerate{Failures: 1}
	tests := []struct {
		name    string
		t       Tally
		tol     *plan.Tolerate
		stopped bool
		want    State
		done    bool
	}{
		{"items still running", tally(Succeeded, Running), nil, false, Running, false},
		{"all succeeded", tally(Succeeded, Succeeded, Skipped), nil, false, Succeeded, true},
		{"empty list", tally(), nil, false, Succeeded, true},
		{"a failure within tolerate", tally(Succeeded, Failed), one, false, Succeeded, true},
		{"past tolerate", tally(Failed, Failed, Succeeded), one, false, Failed, true},
		{"ratio over items that were not skipped", tally(Failed, Succeeded, Skipped, Skipped), &plan.Tolerate{Ratio: 0.5}, false, Succeeded, true},
		{"the run stopped: cancelled", tally(Succeeded, Cancelled), nil, true, Cancelled, true},
		{"the step abandoned its items: failed", tally(Failed, Cancelled), nil, false, Failed, true},
		{"stopped with failures past tolerate: failed", tally(Failed, Cancelled), nil, true, Failed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, done := ItemsEnd(tt.t, tt.tol, tt.stopped)
			if got != tt.want || done != tt.done {
				t.Errorf("ItemsEnd = %s %v, want %s %v", got, done, tt.want, tt.done)
			}
		})
	}
}

func TestTransitions(t *testing.T) {
	valid := [][2]State{{Pending, Running}, {Pending, Skipped}, {Running, Succeeded}, {Running, Failed}, {Running, Cancelled},
		{Pending, Cancelled}, {Pending, Waiting}, {Running, Waiting}, {Waiting, Running}, {Succeeded, Pending}, {Running, Pending}}
	for _, v := range valid {
		if err := CheckTransition("s", v[0], v[1]); err != nil {
			t.Errorf("%v rejected: %v", v, err)
		}
	}
	invalid := [][2]State{{Succeeded, Running}, {Failed, Succeeded}, {Pending, Succeeded}, {Skipped, Running}, {Cancelled, Failed}, {Waiting, Pending}}
	for _, v := range invalid {
		var e ErrInvalidTransition
		if err := CheckTransition("s", v[0], v[1]); !errors.As(err, &e) {
			t.Errorf("%v accepted", v)
		}
	}
	for s := Pending; s < numStates; s++ {
		if got, err := ParseState(s.String()); err != nil || got != s {
			t.Errorf("ParseState(%s) = %v, %v", s, got, err)
		}
	}
}

// A wait's reason goes with the wait: an approved step does not still say
// what it waited for; one failed from its wait says why.
func TestAWaitsReasonEndsWithIt(t *testing.T) {
	m := New([]Step{dep("a"), dep("b")}, plan.ContinueAll, &recorder{})
	m.Examine(m.IDs()...)
	startReady(m)
	m.Wait("a", "waiting for approval: ship?")
	m.Wait("b", "waiting for approval: ship?")
	if got := m.Reason("a"); got != "waiting for approval: ship?" {
		t.Errorf("while waiting: %q", got)
	}
	m.End("a", Succeeded, "", "", "")
	m.End("b", Failed, caperr.Rejected, "", "rejected by bob")
	if got := m.Reason("a"); got != "" {
		t.Errorf("approved, its reason is %q", got)
	}
	if got := m.Reason("b"); got != "rejected by bob" {
		t.Errorf("rejected, its reason is %q", got)
	}
}
