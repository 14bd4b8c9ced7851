package toolrun

import (
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
)

// What a tool's author is told of the usual mistakes (from a new author's
// trial of issue 57).
func TestWhatAToolAuthorIsTold(t *testing.T) {
	t.Parallel()
	const ok = `{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:00Z","message":"ok","feedback":[]`
	items := `[` + strings.Repeat(`1,`, 999) + `1]`
	for _, c := range []struct {
		name, body string
		schema     map[string]any
		want       []string
	}{
		{"something printed after the envelope", "echo '" + ok + "}'\necho done, bye\n", nil,
			[]string{`its stdout does not end with its result envelope: it ends with "done, bye" (stdout.log in its step folder)`}},
		// Cut short or mistyped: not valid JSON (this round's trial).
		{"an envelope cut short", "echo '{\"toolId\": tru'\n", nil,
			[]string{`the result envelope it ends its stdout with is not valid JSON (invalid character '\n' in literal true (expecting 'e')): it ends with "{\"toolId\": tru"`}},
		{"a severity that does not exist", `echo '{"toolId":"t","exitCode":1,"success":false,"timestamp":"2026-11-21T10:00:00Z","message":"no","feedback":[{"phase":"p","level":"error","message":"no","timestamp":"2026-11-21T10:00:00Z"}],"error":{"code":"DEPENDENCY_UNAVAILABLE","severity":"FATAL"}}'; exit 1` + "\n", nil,
			[]string{`the tool's severity "FATAL" is not one of`, "its code's, HIGH, is used"}},
		{"1,000 wrong items", "echo '" + ok + `,"data":{"words":` + items + "}}'\n",
			map[string]any{"type": "object", "properties": map[string]any{"words": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}},
			[]string{"words.4: must be string, not number; and 96 more lines in the step's feedback"}},
		{"an unknown field", "echo '" + ok + `,"data":{"count":1,"lang":"en"}}'` + "\n",
			map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"count": map[string]any{"type": "integer"}, "words": map[string]any{"type": "array"}}},
			[]string{`lang: unknown field "lang" (the schema allows only count, words)`}},
	} {
		m := script(t, c.body, func(m *manifest.Manifest) { m.OutputSchema = c.schema })
		env := run(t, m, nil, 20*time.Second)
		all := env.Message
		for _, f := range env.Feedback {
			all += "\n" + f.Message
		}
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: %q lacks %q", c.name, all, w)
			}
		}
		if strings.Contains(env.Message, "in YAML") {
			t.Errorf("%s: a YAML hint on a tool's JSON: %s", c.name, env.Message)
		}
	}
}

// A stderr event's level is read as loggers write it: any case, and their
// other words for the three; a word that is none of them is a plain line.
func TestEventLevels(t *testing.T) {
	for level, want := range map[string]string{"DEBUG": envelope.LevelInfo, "Warn": envelope.LevelWarning, "fatal": envelope.LevelError, "info": envelope.LevelInfo, "loud": ""} {
		f, ok := parseEvent([]byte(`{"phase":"p","level":"` + level + `","message":"m"}`))
		if ok != (want != "") || f.Level != want {
			t.Errorf("%s: %v %q, want %q", level, ok, f.Level, want)
		}
	}
}
