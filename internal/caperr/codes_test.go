package caperr

import "testing"

// The wire's ranking is the table's: its severities, most severe first.
func TestSeveritiesRankedByTheWire(t *testing.T) {
	for i, s := range []Severity{Critical, High, Medium, Low} {
		if s.Rank() != i {
			t.Errorf("%s ranks %d, want %d", s, s.Rank(), i)
		}
	}
	if Severity("NOPE").Rank() != len(Severities) {
		t.Error("an unknown severity does not rank last")
	}
}
