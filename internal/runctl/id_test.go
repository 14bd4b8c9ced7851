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
	for _, bad := range []string{strings.Repeat("x", MaxIDLength+1), "", " padded"} {
		if err := CheckID(bad); caperr.CodeOf(err) != caperr.InvalidInput {
			t.Errorf("%.20q: %v", bad, err)
		}
	}
	if err := CheckID(strings.Repeat("x", MaxIDLength)); err != nil {
		t.Fatal(err)
	}
}
