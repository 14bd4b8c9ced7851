package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// A template renders in its child exactly as it did in the worker: values
// keep their Go types across (a float64, an int64 and a json.Number
// print and compare differently), null included.
func TestTemplatesRenderAlikeInTheirChild(t *testing.T) {
	t.Parallel()
	values := map[string]any{
		"i": int64(3), "n": int(7), "big": int64(1 << 60), "f": 1.5, "half": 2.5, "num": json.Number("12345678901234567890"),
		"s": "é <b>", "t": true, "null": nil, "list": []any{int64(1), "two", nil, 3.25, []any{}},
		"map": map[string]any{"k": map[string]any{"deep": []any{map[string]any{"x": false}}}},
	}
	for _, tpl := range []string{
		"{{.i}} {{.n}} {{.big}} {{.f}} {{.half}} {{.num}} {{.s}} {{.t}} {{.null}} {{.list}} {{.map}}",
		"{{if eq .i 3}}int{{end}} {{if eq .half 2.5}}float{{end}} {{if eq .num \"x\"}}{{else}}number{{end}}",
		"{{range $k, $v := .map}}{{$k}}={{$v}};{{end}}{{range .list}}[{{.}}]{{end}}",
		"{{printf \"%T %T %T %T %T\" .i .n .f .num .null}} {{json .map}} {{html .s}} {{len .list}}",
		"{{index .list 1 | upper}} {{.map.k.deep}} {{with .null}}x{{else}}none{{end}}",
	} {
		want, werr := renderTemplate(context.Background(), tpl, values)
		got, err := render(context.Background(), tpl, values)
		if got != want || (err == nil) != (werr == nil) {
			t.Errorf("%s:\n child %q %v\nworker %q %v", tpl, got, err, want, werr)
		}
	}
}

// A whole number is an integer to a template: a step's inputs reach it
// through JSON, which decodes every number as a float64, and 1000000
// printed as 1e+06, refused printf's %d and could not be ranged over
// (found trying capflow as a new user). Past 2^53, and with a fraction,
// a number stays a float.
func TestWholeNumbersAreIntegers(t *testing.T) {
	t.Parallel()
	values := map[string]any{"size": 1e6, "n": 3.0, "big": 12345678901.0, "f": 1.5, "huge": 1e20, "neg": -7.0, "zero": math.Copysign(0, -1)}
	got, err := render(context.Background(), `{{.size}} {{printf "%d" .n}} {{range .n}}x{{end}} {{.big}} {{.f}} {{.huge}} {{.neg}} {{.zero}} {{if eq .n 3}}three{{end}}`, values)
	if want := "1000000 3 xxx 12345678901 1.5 1e+20 -7 -0 three"; err != nil || got != want {
		t.Errorf("%q %v, want %q", got, err, want)
	}
}

// An error in the child arrives with its code and its words.
func TestTemplateErrorsCrossWhole(t *testing.T) {
	t.Parallel()
	for tpl, code := range map[string]caperr.Code{
		"{{.missing}}":           caperr.InvalidInput,
		"{{if}}":                 caperr.InvalidInput,
		"{{range 20000}}{{end}}": caperr.InvalidInput,
	} {
		_, want := renderTemplate(context.Background(), tpl, map[string]any{})
		_, got := render(context.Background(), tpl, map[string]any{})
		if caperr.CodeOf(got) != code || got == nil || want == nil || got.Error() != want.Error() {
			t.Errorf("%s: child %v, worker %v, want %s", tpl, got, want, code)
		}
	}
}

// What a template allocates is its child's, never the worker's: the same
// template allocates hundreds of MiB rendered in the worker's own
// process, and next to nothing there through its child.
func TestTemplateMemoryIsTheChilds(t *testing.T) {
	// Not parallel: it reads the process's allocations.
	tpl := `{{range .items}}{{printf "%01000000d" 1 | len}}{{end}}`
	values := map[string]any{"items": make([]any, 200)}
	allocated := func(f func(context.Context, string, map[string]any) (string, error)) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := f(context.Background(), tpl, values); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	if in := allocated(renderTemplate); in < 150<<20 {
		t.Fatalf("rendered in the worker the template allocated %d MiB, not a measure", in>>20)
	}
	if out := allocated(render); out > 16<<20 {
		t.Errorf("rendered through its child the template allocated %d MiB in the worker", out>>20)
	}
}

// BenchmarkTextRender is a small template through a warm child, beside the
// same rendered in the worker's own process: what the isolation costs a
// step.
func BenchmarkTextRender(b *testing.B) {
	values := map[string]any{"name": "capflow", "n": int64(7)}
	for _, way := range []struct {
		name string
		f    func(context.Context, string, map[string]any) (string, error)
	}{{"child", render}, {"worker", renderTemplate}} {
		b.Run(way.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := way.f(context.Background(), "{{.name | upper}} {{.n}}", values); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Values of a type JSON does not decode to go as JSON carries them, and values
// larger than the child's memory are refused as too large for it.
func TestTemplateValuesOfAnyTypeAndSize(t *testing.T) {
	t.Parallel()
	type point struct{ X, Y int }
	got, err := render(context.Background(), "{{.names}} {{.p.X}}", map[string]any{"names": []string{"a", "b"}, "p": point{1, 2}})
	if err != nil || got != "[a b] 1" {
		t.Errorf("typed values: %q %v", got, err)
	}
	_, err = render(context.Background(), "{{len .s}}", map[string]any{"s": strings.Repeat("x", int(evalMemory)+1)})
	if caperr.CodeOf(err) != caperr.ResourceExhausted {
		t.Errorf("values past the budget: %v, want RESOURCE_EXHAUSTED", err)
	}
}

// The request's and the answer's encodings give back what they were
// given, and reading any bytes is an error or a value, never a panic.
func TestRenderRequestsRoundTrip(t *testing.T) {
	t.Parallel()
	req := renderRequest{Template: "{{.}}", Budget: 1500 * time.Millisecond, Values: map[string]any{
		"a": nil, "b": true, "c": false, "d": "é", "e": 3, "f": int64(-1 << 62), "g": uint64(1 << 63), "h": -0.5,
		"i": json.Number("1e400"), "j": []any{map[string]any{}, []any{}, ""}}}
	raw, err := encodeRequest(req, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRequest(raw)
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("%#v %v", got, err)
	}
	for n := range raw {
		if _, err := decodeRequest(raw[:n]); err == nil {
			t.Errorf("%d bytes of %d decoded", n, len(raw))
		}
		_, _ = decodeRequest(append(slices.Clone(raw[:n]), 0xff, 0xff, 0xff, 0x7f)) // never a panic
	}
	if _, err := encodeRequest(req, 10); err != errTooMuch {
		t.Errorf("past its max: %v", err)
	}
	for _, a := range []struct {
		text string
		err  error
	}{{"ok ✓", nil}, {"", caperr.New(caperr.InvalidInput, "template: bad")}} {
		b := encodeAnswer(a.text, a.err)
		text, err := decodeAnswer(b)
		if text != a.text || fmt.Sprint(err) != fmt.Sprint(a.err) || caperr.CodeOf(err) != caperr.CodeOf(a.err) {
			t.Errorf("%q %v: decoded %q %v", a.text, a.err, text, err)
		}
		if _, err := decodeAnswer(b[:len(b)-1]); err != errMalformed {
			t.Errorf("a cut answer: %v", err)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	raw, _ := encodeRequest(renderRequest{Template: "x", Values: map[string]any{"k": []any{1.5, "s"}}}, 0)
	f.Add(raw)
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = decodeRequest(b) })
}

// A json.query's file is decoded in its child alone, exactly: decoded in
// the worker, 15 MB of small objects took a gigabyte of its heap, and
// integers past 2^53 lost their last digits (found attacking issue 57).
func TestQueryFilesAreTheChilds(t *testing.T) {
	// Not parallel: it reads the process's allocations.
	root := t.TempDir()
	big := "[" + strings.Repeat(`{"":1},`, 600000) + `{"":1}]`
	if err := os.WriteFile(filepath.Join(root, "big.json"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "n.json"), []byte(`{"n": 9007199254740993}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := call(t, "json.query", root, map[string]any{"query": "length", "path": "big.json"})
	runtime.ReadMemStats(&after)
	if code := caperr.CodeOf(err); err != nil && code != caperr.ResourceExhausted {
		t.Fatalf("%v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("a 4 MB file took the worker %d MiB to query", got>>20)
	}
	out, err := call(t, "json.query", root, map[string]any{"query": ".n", "path": "n.json"})
	if err != nil || fmt.Sprint(out["result"]) != "9007199254740993" {
		t.Errorf("%v %v", out, err)
	}
}
