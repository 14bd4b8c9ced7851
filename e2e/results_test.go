package e2e

import (
	"strings"
	"testing"
)

// The same requested ID is idempotent (the design's own rule): asking
// again reports the run that ran, and starts nothing; --rerun starts it
// again.
func TestSameIDReportsTheRunThatRan(t *testing.T) {
	file := h.writePlan(t, "same-id", "name: same-id\nsteps:\n  - {id: a, capability: test.noop}\n")
	runs := map[string]int{}
	var first string
	for i, args := range [][]string{{"--id", "e2e-same-id"}, {"--id", "e2e-same-id"}, {"--id", "e2e-same-id", "--rerun"}} {
		code, env, stderr := h.capflow(t, append([]string{"run", file}, args...)...)
		var r runResult
		data(t, env, &r)
		if code != 0 || r.Status != "passed" || r.WorkflowID != "e2e-same-id" {
			t.Fatalf("run %d: exit %d %s %s\n%s", i, code, r.Status, r.Message, stderr)
		}
		runs[r.RunID]++
		switch i {
		case 0:
			first = r.RunID
		case 1:
			if r.RunID != first || !strings.Contains(stderr, "exists already: nothing new started") {
				t.Fatalf("asked again: run %s (first %s)\n%s", r.RunID, first, stderr)
			}
		case 2:
			if r.RunID == first {
				t.Fatal("--rerun started nothing")
			}
		}
	}
	if len(runs) != 2 {
		t.Fatalf("runs %v", runs)
	}
}

// A successful run's envelope tells the phases it went through, and each
// failure the run absorbed (by_severity) is a warning in it.
func TestRunEnvelopeTellsItsPhases(t *testing.T) {
	file := h.writePlan(t, "phases", `name: phases
failure_policy: by_severity
steps:
  - {id: a, capability: test.noop}
  - {id: metrics, capability: test.medium_fail, needs: [a]}
  - {id: b, capability: test.noop, needs: [a]}
`)
	code, env, stderr := h.capflow(t, "run", file)
	var r runResult
	data(t, env, &r)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s %s\n%s", code, r.Status, r.Message, stderr)
	}
	got := map[string]string{}
	for _, f := range env.Feedback {
		got[f.Phase] = f.Level + " " + f.Message
	}
	if !strings.HasPrefix(got["run"], "info passed from ") || got["steps"] != "info 2 succeeded, 1 failed" ||
		!strings.HasPrefix(got["absorbed"], "warning ") || !strings.Contains(got["absorbed"], "metrics") || !strings.Contains(got["report"], "report.json") {
		t.Fatalf("feedback: %v", got)
	}
}
