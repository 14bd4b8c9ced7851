package wfapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// Decoding a workflow input never fails: what a client may not send, or
// sent malformed, is listed by field, sorted.
func TestStartDecoding(t *testing.T) {
	for _, c := range []struct {
		name, in string
		refused  string // fields, comma-separated
	}{
		{"a plan", `{"plan": {"name": "x"}, "inputs": {"a": 1}}`, ""},
		{"a request", `{"request": "hello"}`, ""},
		{"null", `null`, ""},
		{"not an object", `[1, 2]`, ""},
		{"unknown fields", `{"plan": {}, "zeta": 1, "alpha": 2}`, "alpha,zeta"},
		{"wrong types", `{"inputs": [1], "request": 7}`, "inputs,request"},
		{"the engine's carry", `{"carry": {"name": "carry-1.json"}}`, ""},
		// Decoded: the workflow refuses it unless a parent sent it.
		{"a sub-plan's lineage", `{"plan": {"name": "x"}, "lineage": "0190-run"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Start
			if err := json.Unmarshal([]byte(c.in), &s); err != nil {
				t.Fatalf("decoding failed: %v", err)
			}
			var fields []string
			for _, p := range s.Refused {
				fields = append(fields, p.Field)
			}
			want := c.refused
			if c.name == "not an object" {
				want = ""
				if len(s.Refused) != 1 || !strings.Contains(s.Refused[0].Message, "not a JSON object") {
					t.Fatalf("refused %+v", s.Refused)
				}
				return
			}
			if got := strings.Join(fields, ","); got != want {
				t.Fatalf("refused %q, want %q: %+v", got, want, s.Refused)
			}
		})
	}
	var s Start
	_ = json.Unmarshal([]byte(`{"carry": {"name": "carry-1.json"}, "resume": {"segment": 1}}`), &s)
	s.RefuseEngineFields()
	if len(s.Refused) != 2 || s.Carry != nil || s.Resume != nil {
		t.Fatalf("a client's carry and resume must be refused and dropped: %+v", s)
	}
}
