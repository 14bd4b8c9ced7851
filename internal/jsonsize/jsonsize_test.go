package jsonsize

import (
	"encoding/json"
	"strings"
	"testing"
)

// Within never says a value fits that encodes past the limit (found
// attacking issue 57: strings of < escape to six times their length), and
// stops counting shared values early.
func TestWithin(t *testing.T) {
	big := strings.Repeat("x", 40<<10)
	shared := make([]any, 9000)
	for i := range shared {
		shared[i] = big
	}
	for _, v := range []any{
		"abc", strings.Repeat("<", 1000), strings.Repeat("\x01", 100), "\xff\xfe", "a\u2028b",
		map[string]any{"a": 1.5, "b": []any{true, nil, []any{}}, "<k>": map[string]any{}},
		[]any{-1.2345678901234567e-300, 1e21, 0.0, "é"},
	} {
		raw, _ := json.Marshal(v)
		if !Within(v, len(raw)+64) || Within(v, len(raw)-1) {
			t.Errorf("%q: %d bytes encoded; Within(%d) %v, Within(%d) %v", raw, len(raw), len(raw)+64, Within(v, len(raw)+64), len(raw)-1, Within(v, len(raw)-1))
		}
	}
	if Within(map[string]any{"xs": shared}, 64<<20) {
		t.Error("9,000 references to 40 KB fit 64 MB")
	}
	if !Within(map[string]any{"xs": shared[:10]}, 1<<20) {
		t.Error("ten of them do not fit 1 MB")
	}
}
