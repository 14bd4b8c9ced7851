package client

import (
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

// The server calls a run that ended as a decision came NotFound, though it
// is there: those answers say the run ended.
func TestRunEnded(t *testing.T) {
	for msg, want := range map[string]bool{
		"workflow execution already completed":            true,
		"workflow update was aborted by closing workflow": true,
		"workflow not found for ID: x":                    false,
		"context deadline exceeded":                       false,
	} {
		if got := runEnded(serviceerror.NewNotFound(msg)); got != want {
			t.Errorf("runEnded(%q) = %v", msg, got)
		}
	}
}

func TestCronIsFiveFields(t *testing.T) {
	for cron, ok := range map[string]bool{
		"0 3 * * *": true, "*/5 * * * *": true, "@daily": true, "@hourly": true,
		"*/5 * * * * *": false, "0 0 3 * * * 2027": false, "* * * *": false, "@every 5m": false, "@often": false,
	} {
		if err := fiveFields(cron); (err == nil) != ok {
			t.Errorf("%q: %v", cron, err)
		}
	}
}

// A running step's last failure is said in capflow's words, not Temporal's
// ("activity StartToClose timeout (type: StartToClose)").
func TestFailureMessage(t *testing.T) {
	c := &Client{}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), "TASK_TIMEOUT: ran past its timeout"},
		{temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), "TASK_TIMEOUT: no heartbeat within its heartbeat timeout (its worker may have gone)"},
		{temporal.NewApplicationError("disk full", "TOOL_FAILURE"), "disk full"},
	} {
		if got := c.failureMessage("raw", tc.err); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// A status a run has while it goes on filters on runs Temporal still runs
// too: a terminated run keeps the last status it recorded.
func TestWhere(t *testing.T) {
	for _, c := range []struct {
		attrs map[string]string
		want  string
	}{
		{map[string]string{SearchAttrStatus: "passed", SearchAttrPlan: "nightly"}, "CapflowPlan = 'nightly' AND CapflowStatus = 'passed'"},
		{map[string]string{SearchAttrStatus: "running"}, "CapflowStatus = 'running' AND ExecutionStatus = 'Running'"},
		{map[string]string{SearchAttrStatus: "paused", SearchAttrPlan: ""}, "CapflowStatus = 'paused' AND ExecutionStatus = 'Running'"},
		{map[string]string{}, ""},
	} {
		if got, err := Where(c.attrs); err != nil || got != c.want {
			t.Errorf("Where(%v) = %q, %v; want %q", c.attrs, got, err, c.want)
		}
	}
}
