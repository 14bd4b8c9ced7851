package envelope

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

func TestBuilderSuccessAndFailureAreCoherent(t *testing.T) {
	b := NewBuilder("file-checksum")
	b.Info("read", "read 3 bytes")
	ok := b.Succeed("done", map[string]any{"sha256": "x"})
	if errs := Validate(&ok); len(errs) > 0 {
		t.Fatalf("success envelope invalid: %v", errs)
	}
	if ok.ExitCode != 0 || ok.Error != nil {
		t.Fatalf("success envelope: exit %d, error %v", ok.ExitCode, ok.Error)
	}

	f := NewBuilder("x").Fail(caperr.SchemaViolation, "bad data", nil)
	if errs := Validate(&f); len(errs) > 0 {
		t.Fatalf("failure envelope invalid: %v", errs)
	}
	if f.ExitCode != 2 || f.Error.Code != caperr.SchemaViolation || f.Error.Severity != caperr.High || f.Error.Retryable {
		t.Fatalf("failure envelope = %+v / %+v", f, f.Error)
	}
	if f.Feedback[len(f.Feedback)-1].Level != LevelError {
		t.Fatal("failure has no error feedback")
	}
}

// Events made elsewhere join the feedback in time order: a sandbox
// warning stamped before "start" went after it, an envelope Validate refuses.
func TestAppendKeepsTimeOrder(t *testing.T) {
	base := Now().Add(-time.Minute)
	stamp := func(ms int) string { return Timestamp(base.Add(time.Duration(ms) * time.Millisecond)) }
	b := NewBuilder("four")
	b.Append(Feedback{Phase: "start", Level: LevelInfo, Message: "started", Timestamp: stamp(5)})
	b.Append(Feedback{Phase: "sandbox", Level: LevelWarning, Message: "ran unconfined", Timestamp: stamp(4)},
		Feedback{Phase: "stderr", Level: LevelInfo, Message: "same ms", Timestamp: stamp(5)},
		Feedback{Phase: "stderr", Level: LevelInfo, Message: "later", Timestamp: stamp(9)})
	env := b.FailWithExit(caperr.ToolFailure, 4, "four exited 4", nil)
	if errs := Validate(&env); len(errs) > 0 {
		t.Fatalf("invalid: %v", errs)
	}
	var got []string
	for _, f := range env.Feedback {
		got = append(got, f.Message)
	}
	if want := "ran unconfined,started,same ms,later,four exited 4"; strings.Join(got, ",") != want {
		t.Fatalf("feedback order %v, want %s", got, want)
	}
}

func TestValidateCatchesContractViolations(t *testing.T) {
	now := Timestamp(time.Now())
	tests := []struct {
		name string
		env  Envelope
		want string
	}{
		{"exit contradicts success", Envelope{ToolID: "t", ExitCode: 1, Success: true, Timestamp: now}, "contradicts"},
		{"failure without error feedback", Envelope{ToolID: "t", ExitCode: 1, Timestamp: now}, "no feedback entry with level error"},
		{"bad timestamp", Envelope{ToolID: "t", Success: true, Timestamp: "yesterday"}, "not RFC 3339"},
		{"bad level", Envelope{ToolID: "t", Success: true, Timestamp: now, Feedback: []Feedback{{Level: "debug", Timestamp: now}}}, "level \"debug\""},
		{"out of order", Envelope{ToolID: "t", Success: true, Timestamp: now, Feedback: []Feedback{
			{Level: "info", Timestamp: "2026-01-02T00:00:00Z"}, {Level: "info", Timestamp: "2026-01-01T00:00:00Z"}}}, "earlier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := strings.Join(Validate(&tt.env), "|")
			if !strings.Contains(errs, tt.want) {
				t.Fatalf("Validate() = %q, want it to mention %q", errs, tt.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	good := `{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:00Z","message":"ok","feedback":[],"data":{"n":12345678901234567890}}`
	env, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if n := env.Data.(map[string]any)["n"].(json.Number).String(); n != "12345678901234567890" {
		t.Fatalf("big number lost precision: %s", n)
	}
	for _, bad := range []string{`garbage`, `{"toolId":"t"}`, `{"toolId":"t","exitCode":"0","success":true,"timestamp":"2026-11-21T10:00:00Z","message":"","feedback":[]}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Fatalf("Parse(%s) accepted", bad)
		}
	}
	// Text that is not JSON is told so; JSON that is not an object too.
	for in, want := range map[string]string{"{\"toolId\": tru\n}": "not valid JSON: invalid character '\\n' in literal true (expecting 'e')",
		`{"toolId": "t"`: "not valid JSON: unexpected EOF", `[1, 2]`: "not a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"} {
		if _, err := Parse([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("Parse(%q): %v, want %s", in, err, want)
		}
	}
	// Every missing field at once.
	if _, err := Parse([]byte(`{"toolId":"t","exitCode":0,"success":true}`)); err == nil || err.Error() != `required fields "timestamp", "message", "feedback" are missing` {
		t.Fatalf("missing fields: %v", err)
	}
}

func TestRedaction(t *testing.T) {
	r := NewRedactor("s3cr3t-token", "ab")
	b := NewBuilder("t").WithRedactor(r)
	b.Error("upload", "auth with s3cr3t-token failed", "token=s3cr3t-token")
	env := b.Fail(caperr.ToolFailure, "failed: s3cr3t-token", map[string]any{"k": []any{"x s3cr3t-token"}})
	out, _ := json.Marshal(env)
	if strings.Contains(string(out), "s3cr3t-token") {
		t.Fatalf("secret leaked: %s", out)
	}
	if !strings.Contains(string(out), Mask) {
		t.Fatal("mask missing")
	}
	if r.String("ab cd") != "ab cd" {
		t.Fatal("short values must not be redacted")
	}
}
