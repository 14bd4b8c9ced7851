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
