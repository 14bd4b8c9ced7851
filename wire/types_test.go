package wire

import (
	"os/exec"
	"strings"
	"testing"
)

// A service importing client (or written on it alone, e2e/otherservice)
// pulls no registry, CEL, JSON Schema compiler or capflow internal package.
func TestImportsAreLight(t *testing.T) {
	for _, pkg := range []string{".", "../e2e/otherservice"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "capflow/capflow/internal") || strings.Contains(dep, "cel-go") || strings.Contains(dep, "jsonschema") {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}

// The CLI is a client: it reaches Temporal only through this package.
func TestCLIImportsNoSDKClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}: {{.Imports}} {{.TestImports}}", "../internal/cli/...", "../starter/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "go.temporal.io/sdk/client") {
			t.Errorf("%s", line)
		}
	}
}

func TestDecisionUpdateID(t *testing.T) {
	approve := DecideRequest{Step: "gate", Action: ActionApprove, By: "a"}
	waiting := Result{Steps: []StepResult{{ID: "gate", Status: StepWaiting, Waiting: &Wait{ID: "gate#2"}}}}
	answered := Result{Steps: []StepResult{{ID: "gate", Status: StepSucceeded, Decisions: []Decision{{Wait: "gate#2", Action: ActionApprove}}}}}
	tests := []struct {
		name string
		r    Result
		req  DecideRequest
		want string
	}{
		{"the wait it answers", waiting, approve, "decide/gate#2/approve"},
		{"sent again after it was answered: the run says what was decided", answered, approve, ""},
		{"a step that never waited", Result{Steps: []StepResult{{ID: "gate", Status: StepPending}}}, approve, ""},
		{"no such step", waiting, DecideRequest{Step: "nope", Action: ActionApprove}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.DecisionUpdateID(tt.req); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A run that ended as a decision came (the first answer let it finish)
// refuses it the way a running one would, saying what was decided; the
// server calls such a run NotFound, though it is there.
func TestEndedRunRefusesWhatWasDecided(t *testing.T) {
	answered := Result{Steps: []StepResult{{ID: "gate", Status: StepSucceeded, Decisions: []Decision{
		{Action: ActionApprove, By: "svc", At: "t1"}}}}}
	if got, want := answered.Decided("gate"), "step gate is succeeded, not waiting; already decided: approved by svc at t1"; got != want {
		t.Errorf("decided: %q, want %q", got, want)
	}
	if got := answered.Decided("nope"); got != "" {
		t.Errorf("no such step: %q", got)
	}
}

func TestDecisionString(t *testing.T) {
	for a, want := range map[Action]string{ActionApprove: "approved by a at t", ActionReject: "rejected by a at t",
		ActionRetry: "retried by a at t", ActionSkip: "skipped by a at t", ActionFail: "failed by a at t"} {
		if got := (Decision{Action: a, By: "a", At: "t"}).String(); got != want {
			t.Errorf("%s: %q, want %q", a, got, want)
		}
	}
}

func TestStatuses(t *testing.T) {
	for _, s := range []RunStatus{StatusResolving, StatusRunning, StatusPaused} {
		if s.Ended() {
			t.Errorf("%s ended", s)
		}
	}
	for _, s := range []RunStatus{StatusPassed, StatusFailed, StatusCancelled, StatusInvalid, StatusPartialComplete, StatusBlockedByPolicy} {
		if !s.Ended() {
			t.Errorf("%s not ended", s)
		}
	}
	ended := 0
	for _, s := range RunStatuses {
		if s.Ended() {
			ended++
		}
	}
	if len(RunStatuses) != 9 || ended != 6 {
		t.Errorf("RunStatuses: %v", RunStatuses)
	}
	if StepWaiting.Terminal() || !StepBlocked.Terminal() {
		t.Error("terminal states")
	}
}

// A decision no run takes is refused before it is sent, with the run's
// own words.
func TestDecideRequestCheck(t *testing.T) {
	for _, c := range []struct {
		req  DecideRequest
		want string
	}{
		{DecideRequest{Step: "s", Action: ActionApprove, By: "ann"}, ""},
		{DecideRequest{Step: "s", Action: ActionRetry, By: "ann", Timeout: "5m"}, ""},
		{DecideRequest{Step: "s", Action: ActionApprove, By: "  "}, "a decision needs who made it (by)"},
		{DecideRequest{Step: "s", Action: ActionApprove, By: strings.Repeat("b", MaxDecisionBy+1)}, "a decision's by is at most 256 bytes and its comment at most 16384 (this one: 257 and 0)"},
		{DecideRequest{Step: "s", Action: ActionApprove, By: "ann", Comment: strings.Repeat("c", MaxDecisionComment+1)}, "a decision's by is at most 256 bytes and its comment at most 16384 (this one: 3 and 16385)"},
		{DecideRequest{Step: "s", Action: ActionSkip, By: "ann", Timeout: "5m"}, "a decision's timeout goes with retry only"},
		{DecideRequest{Step: "s", Action: ActionRetry, By: "ann", Timeout: "-5m"}, `timeout "-5m" is not a positive duration like 30s or 5m`},
		{DecideRequest{Step: "s", Action: ActionRetry, By: "ann", Timeout: "soon"}, `timeout "soon" is not a positive duration like 30s or 5m`},
	} {
		got := ""
		if err := c.req.Check(); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.req, got, c.want)
		}
	}
}
func TestReservedEnding(t *testing.T) {
	for id, want := range map[string]string{
		"fetch": "", "c-retry": "", "retry-1": "", "after-local": "", "host-2x": "",
		"a-retry-1": "-retry-1", "b-after-local": "-after-local", "c-rerun-12": "-rerun-12", "d-host-2-rerun-1": "-host-2-rerun-1",
	} {
		if got := ReservedEnding(id); got != want {
			t.Errorf("ReservedEnding(%q) = %q, want %q", id, got, want)
		}
	}
}

// A pending activity's attempt is its step's: a step that continued as
// this activity after two attempts counts on from them.
func TestStepAttempts(t *testing.T) {
	for _, c := range []struct {
		name          string
		hb            Heartbeat
		attempt, max  int32
		wantA, wantMx int32
	}{
		{"an older worker's heartbeat", Heartbeat{Attempt: 2}, 2, 3, 2, 3},
		{"first activity", Heartbeat{Attempt: 2, ActivityAttempt: 2, MaxAttempts: 3}, 2, 3, 2, 3},
		{"after a local attempt, its first", Heartbeat{Attempt: 2, ActivityAttempt: 1, MaxAttempts: 3}, 1, 2, 2, 3},
		{"a retry before it beats: the last beat's offset", Heartbeat{Attempt: 3, ActivityAttempt: 1, MaxAttempts: 5}, 2, 3, 4, 5},
		{"no limit: no maximum below the attempt", Heartbeat{Attempt: 3, ActivityAttempt: 1, MaxAttempts: 2}, 1, 0, 3, 0},
	} {
		a, m := c.hb.StepAttempts(c.attempt, c.max)
		if a != c.wantA || m != c.wantMx {
			t.Errorf("%s: %d of %d, want %d of %d", c.name, a, m, c.wantA, c.wantMx)
		}
	}
}
