package runctl

import (
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

func TestWorkflowIDsFitSQL(t *testing.T) {
	id := NewWorkflowID(strings.Repeat("Long Plan ", 40))
	if len(id) > MaxIDLength || !strings.HasPrefix(id, "capflow-long-plan-long-plan") || CheckID(id) != nil {
		t.Fatalf("%d bytes: %s", len(id), id)
	}
	// A limit's workflow ID is never a run's (hostile findings at 6003afe, 9b).
	for _, bad := range []string{strings.Repeat("x", MaxIDLength+1), "", " padded", "capflow-limit:tool:T", "capflow-limit:capflow:tool:T"} {
		if err := CheckID(bad); caperr.CodeOf(err) != caperr.InvalidInput {
			t.Errorf("%.20q: %v", bad, err)
		}
	}
	if err := CheckID(strings.Repeat("x", MaxIDLength)); err != nil {
		t.Fatal(err)
	}
}
