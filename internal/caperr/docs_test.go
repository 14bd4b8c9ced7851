package caperr

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDocsTableMatchesCode keeps docs/errors.md and the table in step.
func TestDocsTableMatchesCode(t *testing.T) {
	b, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, i := range All() {
		retry := "no"
		if i.Retryable {
			retry = "yes"
		}
		row := fmt.Sprintf("| `%s` | %s | %s | %d | %s |", i.Code, i.Severity, retry, i.ExitCode, i.Description)
		if !strings.Contains(doc, row) {
			t.Errorf("docs/errors.md lacks or differs on:\n%s", row)
		}
	}
}

// TestDocsAdviceMatchesCode: every code has advice, and docs/errors.md
// shows the same.
func TestDocsAdviceMatchesCode(t *testing.T) {
	b, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range All() {
		a := Advice(i.Code)
		if a == "" {
			t.Errorf("%s has no advice", i.Code)
		}
		if row := fmt.Sprintf("| `%s` | %s |", i.Code, a); !strings.Contains(string(b), row) {
			t.Errorf("docs/errors.md lacks or differs on:\n%s", row)
		}
	}
}
