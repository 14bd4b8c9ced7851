package plantest

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/capflow/capflow/internal/schema"
)

// generated is a result that satisfies an output schema: its first
// example, else its default, else a minimal valid value (strings given
// what a simple pattern asks, a digest's hex say).
func generated(doc map[string]any) any {
	if doc == nil {
		return map[string]any{}
	}
	if ex, ok := doc["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	return fitPatterns(doc, schema.Sample(doc))
}

// fitPatterns replaces each string of v that its schema's pattern refuses
// with one it accepts, where the pattern is simple enough to say.
func fitPatterns(doc map[string]any, v any) any {
	switch x := v.(type) {
	case map[string]any:
		props, _ := doc["properties"].(map[string]any)
		for k, val := range x {
			if ps, ok := props[k].(map[string]any); ok {
				x[k] = fitPatterns(ps, val)
			}
		}
	case []any:
		if items, ok := doc["items"].(map[string]any); ok {
			for i := range x {
				x[i] = fitPatterns(items, x[i])
			}
		}
	case string:
		if p, ok := doc["pattern"].(string); ok {
			if s, ok := matching(p, x); ok {
				return s
			}
		}
	}
	return v
}

// simplePattern is a pattern of one character class repeated: ^[0-9a-f]{64}$.
var simplePattern = regexp.MustCompile(`^\^\[([^\]]+)\](\{(\d+)(,\d*)?\}|\+|\*)\$$`)

// matching is s when pattern accepts it, else a string pattern accepts
// (ok false when it cannot tell one).
func matching(pattern, s string) (string, bool) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", false
	}
	if re.MatchString(s) {
		return s, true
	}
	candidates := []string{"a", "0", "x1", "abc"}
	if m := simplePattern.FindStringSubmatch(pattern); m != nil {
		n := 1
		if m[3] != "" {
			n, _ = strconv.Atoi(m[3])
		}
		class := strings.TrimPrefix(m[1], "^")
		if !strings.HasPrefix(m[1], "^") && class != "" && n <= 4096 {
			candidates = append([]string{strings.Repeat(class[:1], n)}, candidates...)
		}
	}
	for _, c := range candidates {
		if re.MatchString(c) {
			return c, true
		}
	}
	return "", false
}
