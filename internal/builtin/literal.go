package builtin

import (
	"context"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/jq"
)

// CheckLiteral returns the mistake in a json.query query or a text.render
// template written in a plan as it is (no ${...} in it), and the input
// field it is in: what would fail the step when it ran, found before. It
// parses in this process, for a person's own check of a plan (the CLI);
// a worker leaves every parse to an evaluator child.
func CheckLiteral(builtin string, in map[string]any) (field string, err error) {
	switch builtin {
	case "json.query":
		q, ok := in["query"].(string)
		if !ok || strings.Contains(q, "${") || len(q) > maxQuery {
			return "", nil
		}
		if err := jq.Check(q); err != nil {
			return "query", caperr.New(caperr.InvalidInput, "query %q: %v", q, err)
		}
	case "text.render":
		src, ok := in["template"].(string)
		if !ok || strings.Contains(src, "${") || !hasAction(src) {
			return "", nil
		}
		live := context.Background()
		if _, err := parseTemplate(src, &live); err != nil {
			return "template", err
		}
	}
	return "", nil
}
