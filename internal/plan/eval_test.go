package plan

import (
	"strings"
	"testing"
)

// The text Eval builds by interpolating references is bounded: a plan of a
// few KB repeating one large reference in a string built gigabytes and
// killed its worker (found attacking issue 57). A single reference shares
// its value and builds nothing.
func TestEvalBoundsInterpolation(t *testing.T) {
	sc := Scope{Inputs: map[string]any{"b": map[string]any{"s": strings.Repeat("x", 60000)}, "n": 1.0}}
	for _, tc := range []struct {
		name string
		with any
		ok   bool
	}{
		{"one reference in text", map[string]any{"t": "a ${inputs.b} z"}, true},
		{"many in one string", map[string]any{"t": "x" + strings.Repeat("${inputs.b}", 2000)}, false},
		{"many strings", map[string]any{"l": strings.Split(strings.Repeat("x${inputs.b},", 2000), ",")}, false},
		{"shared whole references", map[string]any{"l": strings.Split(strings.Repeat("${inputs.b},", 2000), ",")[:2000]}, true},
		{"numbers", map[string]any{"t": "n=${inputs.n}"}, true},
	} {
		var with any = tc.with
		if m, ok := with.(map[string]any); ok {
			if l, ok := m["l"].([]string); ok {
				list := make([]any, len(l))
				for i, s := range l {
					list[i] = s
				}
				with = map[string]any{"l": list}
			}
		}
		_, err := sc.Eval(with)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "passes 64 MB")) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
