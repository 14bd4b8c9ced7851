package builtin

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// A template whose loops write nothing, or that calls itself, stops once
// its budget ends: it ran on after its step had given up, a core for
// hours (found attacking issue 57). Its child stops it by itself, and is
// kept for the next template.
func TestTemplatesStopWithTheirBudget(t *testing.T) {
	list := make([]any, 1000)
	for name, tpl := range map[string]string{
		"nested ranges": "{{range $.a}}{{range $.a}}{{range $.a}}{{end}}{{end}}{{end}}done",
		"calls":         exponentialCalls(40),
		"long actions": `{{$s := printf "%4000000s" "x"}}{{$a := slice $s 1 4000000}}{{$b := slice $s 0 3999999}}{{$_ := 0}}` +
			strings.Repeat(`{{$_ = eq $a $b $b $b $b $b $b $b}}`, 1000),
	} {
		// As its child renders it: on one goroutine, stopped by its ticks.
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := renderTemplate(ctx, tpl, map[string]any{"a": list})
			done <- err
		}()
		select {
		case err := <-done:
			if caperr.CodeOf(err) != caperr.TaskTimeout {
				t.Fatalf("%s: %v, want TASK_TIMEOUT", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still rendering 20 s after its 50 ms", name)
		}
	}
	// A child stops a template at the budget it was sent, answers, and
	// serves the next one.
	raw, _ := encodeRequest(renderRequest{Template: "{{range $.a}}{{range $.a}}{{range $.a}}{{end}}{{end}}{{end}}", Values: map[string]any{"a": list}, Budget: 50 * time.Millisecond}, 0)
	b, err := textChildren.Ask(context.Background(), int64(evalMemory), raw, time.Minute)
	if _, aerr := decodeAnswer(b); err != nil || caperr.CodeOf(aerr) != caperr.TaskTimeout {
		t.Fatalf("%v %v, want the child's TASK_TIMEOUT", err, aerr)
	}
	if !textChildren.Ready(int64(evalMemory)) {
		t.Error("the child that stopped the template is not kept")
	}
	// A template that calls itself is refused before it runs: under nested
	// withs it overflowed the stack, which kills the worker.
	rec := `{{define "r"}}` + strings.Repeat(`{{with .}}`, 10) + `{{template "r" .}}` + strings.Repeat(`{{end}}`, 10) + `{{end}}{{template "r" 1}}`
	for _, tpl := range []string{rec, `{{define "a"}}{{template "b"}}{{end}}{{define "b"}}{{template "a"}}{{end}}{{template "a"}}`} {
		if _, err := call(t, "text.render", "", map[string]any{"template": tpl}); caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "recursion is not supported") {
			t.Fatalf("%s: %v, want INVALID_INPUT (recursion)", tpl, err)
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

// A query past 1 MiB is refused before it is parsed: gojq took seven
// seconds of the worker's CPU, outside any budget, to parse 16 MB (found
// attacking issue 57). The refused query does not parse either: refused
// after parsing, it would fail as a syntax error. One of 1 MiB runs.
func TestQueryTextIsBounded(t *testing.T) {
	t.Parallel()
	_, err := call(t, "json.query", "", map[string]any{"query": strings.Repeat("1+", 1<<20), "input": nil})
	if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "2.0 MiB, more than 1.0 MiB") {
		t.Fatalf("%v, want INVALID_INPUT (2.0 MiB, more than 1.0 MiB)", err)
	}
	out, err := call(t, "json.query", "", map[string]any{"query": strings.Repeat(" ", 1<<20-1) + "1", "input": nil})
	if err != nil || fmt.Sprint(out["result"]) != "1" {
		t.Fatalf("a query of 1 MiB: %v %v", out, err)
	}
}

// A query's results hold nothing a reader cannot keep, as a tool's data:
// a number past float64 (tonumber of 400 digits) or nesting past 200
// levels is the query's INVALID_INPUT, naming the place (found re-attacking
// issue 57: a succeeded step whose data its readers failed on).
func TestQueryResultsAreCheckedAsData(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{
		`["1" * 400 | tonumber]`:           "data /result/0: 1111111111111111111111111111111111111111 is not a number a JSON reader keeps",
		`reduce range(300) as $i (0; [.])`: "data /result/0/0/0",
		`{a: 1e300}`:                       "",
	} {
		_, err := call(t, "json.query", "", map[string]any{"query": q, "input": nil})
		if (want == "") != (err == nil) || (err != nil && (caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), want))) {
			t.Errorf("%s: %v, want %q", q, err, want)
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
		"doubling":                 {`{{$a := printf "%1000000d" 0}}` + strings.Repeat(`{{$a = print $a $a}}`, 6) + `{{len $a}}`, ""},
		"a long join":              {`{{len (join (printf "%1000d" 0) .xs)}}`, ""},
		"widths":                   {strings.Repeat(`%1000000d`, 5), ""},
		"a width for each item":    {`{{printf "%1000000d" (slice .xs 0 10) | len}}`, ""},
		"extra arguments":          {`{{$a := printf "%1000000d" 0}}{{printf "" $a $a $a $a $a | len}}`, ""},
		"a width from an argument": {`{{printf "%[1]*[2]d" 1000000 0 | len}}`, "*"},
		"a large text once":        {`{{printf "%s %d" .s 1 | len}}|{{html .s | len}}|{{json (slice .xs 0 5000) | len}}`, "1048578|1048576|10001"},
		"printf":                   {`{{printf "%05d|%-3s|%q|%.2f" 42 "a" "b" 1.5}}`, `00042|a  |"b"|1.50`},
		"print":                    {`{{print "a" 1 "b"}}|{{println "x" 2}}`, "a1b|x 2\n"},
		"escapers":                 {`{{html "<a>"}}|{{js "'"}}|{{urlquery "a b"}}`, `&lt;a&gt;|\'|a+b`},
		"join and json":            {`{{join "," (slice .xs 0 3)}}|{{json (slice .xs 0 2)}}|{{upper "a"}}`, "0,0,0|[0,0]|A"},
	} {
		tpl := tc.tpl
		if name == "widths" {
			tpl = `{{printf "` + tc.tpl + `" 1 2 3 4 5 | len}}`
		}
		out, err := call(t, "text.render", "", map[string]any{"template": tpl, "values": map[string]any{"xs": xs, "s": strings.Repeat("a", 1<<20)}})
		if tc.want == "*" {
			if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "(*) is not supported") {
				t.Errorf("%s: %v %v, want INVALID_INPUT (* is not supported)", name, out, err)
			}
			continue
		}
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

// exponentialCalls is a template of n levels, each calling the next twice:
// 2^n calls, and no recursion.
func exponentialCalls(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{{define "t%d"}}{{template "t%d"}}{{template "t%d"}}{{end}}`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `{{define "t%d"}}{{end}}{{template "t0"}}done`, n)
	return b.String()
}

// What a template may ask of the parser and of a call is bounded before it
// runs (found attacking issue 57): its text (parsing takes about 60 bytes
// of heap a byte), how deep its actions nest (a stack overflow kills the
// process: 600,000 {{if.}} did), and a call's arguments (eq compares its
// first with each).
func TestTemplateSourceIsBounded(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ tpl, refused string }{
		"deep ifs":         {strings.Repeat("{{if.}}", 1001) + strings.Repeat("{{end}}", 1001), "nest more than 1000"},
		"unclosed ifs":     {strings.Repeat("{{if 1}}", 600000), "more than 1.0 MiB"},
		"else if chains":   {"{{if 0}}" + strings.Repeat("{{else if 0}}", 1000) + "{{end}}", "nest more than 1000"},
		"many args":        {"{{print 1" + strings.Repeat(" 1", 300) + "}}", "too many arguments"},
		"long comparisons": {"{{eq 1" + strings.Repeat(" 1", 9) + "}}", "too many arguments"},
		"ends in comments": {strings.Repeat(strings.Repeat("{{if 0}}", 100)+"{{/* "+strings.Repeat("{{end}}", 100)+" */}}", 11) + strings.Repeat("{{end}}", 1100), "nest more than 1000"},
		"ends in strings":  {strings.Repeat(`{{if 0}}{{"{{end}}"}}`, 1001) + strings.Repeat("{{end}}", 1001), "nest more than 1000"},
		"nested, closed":   {strings.Repeat("{{with 1}}{{if .}}", 400) + "x" + strings.Repeat("{{end}}{{end}}", 400), ""},
		"chains in turn":   {strings.Repeat("{{if 0}}"+strings.Repeat("{{else if 0}}", 10)+"{{else}}y{{end}}", 300), ""},
	} {
		out, err := call(t, "text.render", "", map[string]any{"template": tc.tpl})
		if tc.refused == "" {
			if err != nil || (out["text"] != "x" && out["text"] != strings.Repeat("y", 300)) {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), tc.refused) {
			t.Errorf("%s: %v, want INVALID_INPUT (%s)", name, err, tc.refused)
		}
	}
}

// A format that prints one large argument many times is refused at once:
// counting each verb's cost walked the argument again for each, hours of a
// core after the step gave up (found attacking issue 57).
func TestPrintfMeasuresEachArgumentOnce(t *testing.T) {
	// Not parallel: its large values would count against the heap
	// budget of the package's parallel tests. 131,072 items: the values
	// are the text child's too, within its budget (32 MiB in these tests).
	b := make([]any, 1<<17)
	for i := range b {
		b[i] = 1.0
	}
	tpl := `{{$f := "%[1]v"}}{{range 19}}{{$f = print $f $f}}{{end}}{{printf $f .b | len}}`
	if _, err := call(t, "text.render", "", map[string]any{"template": tpl, "values": map[string]any{"b": b}}); caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "larger than 4.0 MiB") {
		t.Fatalf("%v, want INVALID_INPUT (larger than 4.0 MiB)", err)
	}
}

// printf's Go syntax (%#v) counts what it prints, and a map in values is
// bounded (ranging over one sorts its keys first, which nothing stops;
// found attacking issue 57).
func TestTemplateValuesAndGoSyntaxAreBounded(t *testing.T) {
	// Not parallel: its large values would count against the heap
	// budget of the package's parallel tests.
	lists := make([]any, 300000)
	for i := range lists {
		lists[i] = []any{}
	}
	if _, err := call(t, "text.render", "", map[string]any{"template": `{{printf "%#v" .l | len}}`, "values": map[string]any{"l": lists}}); caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "larger than 4.0 MiB") {
		t.Errorf("%%#v: %v, want INVALID_INPUT (larger than 4.0 MiB)", err)
	}
	keys := map[string]any{}
	for i := 0; i <= maxKeys; i++ {
		keys[strconv.Itoa(i)] = 0.0
	}
	if _, err := call(t, "text.render", "", map[string]any{"template": `{{range .m}}{{break}}{{end}}`, "values": map[string]any{"m": keys}}); caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), "more than 100000") {
		t.Errorf("a large map: %v, want INVALID_INPUT (more than 100000)", err)
	}
}

// Templates of many small actions of the shapes that made checkSource
// quadratic (a comment looked for from every action on: a 1 MiB template
// of "{{/}}" took 17 s of the worker's CPU, outside any budget; found
// attacking issue 57) pass it; BenchmarkCheckSource times them.
func TestTemplateSourceOfManyActions(t *testing.T) {
	t.Parallel()
	for _, src := range manyActions() {
		if err := checkSource(src); err != nil {
			t.Errorf("%.10q: %v", src, err)
		}
	}
}

func manyActions() []string {
	var out []string
	for _, unit := range []string{"{{/}}", "{{}}/", "{{/*}}", `{{"}}`, "{{- /* c */ -}}"} {
		out = append(out, strings.Repeat(unit, maxTemplate/len(unit)))
	}
	return out
}

// BenchmarkCheckSource reads 1 MiB templates of many small actions: a
// few milliseconds each, where reading them again from every action took
// seconds.
func BenchmarkCheckSource(b *testing.B) {
	srcs := manyActions()
	for b.Loop() {
		for _, src := range srcs {
			_ = checkSource(src)
		}
	}
}
