package builtin

import (
	"context"
	"runtime"
	"strings"
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

// text.render's functions refuse a result past MaxRender before building
// it: a few lines of template built gigabytes in one call and killed the
// worker (found attacking issue 57); what they print is text/template's.
func TestTemplateFunctionsAreBounded(t *testing.T) {
	t.Parallel()
	xs := make([]any, 10000)
	for i := range xs {
		xs[i] = 0
	}
	for name, tc := range map[string]struct{ tpl, want string }{
		"doubling":      {`{{$a := printf "%1000000d" 0}}` + strings.Repeat(`{{$a = print $a $a}}`, 6) + `{{len $a}}`, ""},
		"a long join":   {`{{len (join (printf "%1000d" 0) .xs)}}`, ""},
		"widths":        {strings.Repeat(`%1000000d`, 5), ""},
		"printf":        {`{{printf "%05d|%-3s|%q|%.2f" 42 "a" "b" 1.5}}`, `00042|a  |"b"|1.50`},
		"print":         {`{{print "a" 1 "b"}}|{{println "x" 2}}`, "a1b|x 2\n"},
		"escapers":      {`{{html "<a>"}}|{{js "'"}}|{{urlquery "a b"}}`, `&lt;a&gt;|\'|a+b`},
		"join and json": {`{{join "," (slice .xs 0 3)}}|{{json (slice .xs 0 2)}}|{{upper "a"}}`, "0,0,0|[0,0]|A"},
	} {
		tpl := tc.tpl
		if name == "widths" {
			tpl = `{{printf "` + tc.tpl + `" 1 2 3 4 5 | len}}`
		}
		out, err := call(t, "text.render", "", map[string]any{"template": tpl, "values": map[string]any{"xs": xs}})
		if tc.want == "" {
			if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "larger than 4.0 MiB") {
				t.Errorf("%s: %v %v, want INVALID_INPUT (larger than 4.0 MiB)", name, out, err)
			}
			continue
		}
		if err != nil || out["text"] != tc.want {
			t.Errorf("%s: %q %v, want %q", name, out["text"], err, tc.want)
		}
	}
}
