package builtin

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
)

// A template whose loops write nothing, or that calls itself, stops once
// its budget ends: it ran on after its step had given up, a core for
// hours (found attacking issue 57). Not parallel: its goroutines are
// counted while the package's parallel tests wait.
func TestTemplatesStopWithTheirBudget(t *testing.T) {
	list := make([]any, 1000)
	render, _ := Lookup("text.render")
	for name, tpl := range map[string]string{
		"nested ranges": "{{range $.a}}{{range $.a}}{{range $.a}}{{end}}{{end}}{{end}}done",
		"recursion":     `{{define "r"}}{{if .}}{{template "r" (slice . 1)}}{{template "r" (slice . 1)}}{{end}}{{end}}{{template "r" $.a}}`,
	} {
		base := runtime.NumGoroutine()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := render(ctx, map[string]any{"template": tpl, "values": map[string]any{"a": list}}, &Env{Feedback: envelope.NewBuilder("t")})
		cancel()
		if caperr.CodeOf(err) != caperr.TaskTimeout {
			t.Fatalf("%s: %v, want TASK_TIMEOUT", name, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > base {
			t.Fatalf("%s: %d goroutines left running after the template gave up (%d before)", name, n-base, base)
		}
	}
	// A template's loops and calls print nothing of their ticks.
	out, err := call(t, "text.render", "", map[string]any{"template": `{{define "x"}}<{{.}}>{{end}}{{range .xs}}{{template "x" .}}{{end}}`, "values": map[string]any{"xs": []any{1, 2}}})
	if err != nil || out["text"] != "<1><2>" {
		t.Fatalf("%v %v", out, err)
	}
}

// A query that may read the clock is never pure: evaluated ahead, it
// gave a step the time Resolve ran at (found attacking issue 57).
func TestQueriesReadingTheClockAreNotPure(t *testing.T) {
	Prepare()
	for q, clock := range map[string]bool{
		"now": true, "now | todate": true, "[1, now]": true, "(now)": true, "def f: now; f": true,
		".now": false, "$now": false, ".a.now_b": false, "[.[] * 2]": false, "known": false, "nowhere": false,
	} {
		if got := Pure("json.query", map[string]any{"query": q, "input": 1}); got == clock {
			t.Errorf("query %q: pure %v, want %v", q, got, !clock)
		}
	}
}
