package client

import (
	"testing"

	"go.temporal.io/api/serviceerror"
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
