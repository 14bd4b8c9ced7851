package yamldoc

import (
	"errors"
	"reflect"
	"testing"

	"github.com/capflow/capflow/internal/caperr"
)

const sample = `name: demo
version: 1.0.0
list:
  - a
  - {x: 1, y: true}
nested:
  deep:
    v: 2.5
`

func TestPositionsAndValues(t *testing.T) {
	d, err := Parse("t.yaml", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path []string
		line int
	}{
		{[]string{"name"}, 1},
		{[]string{"list", "1", "y"}, 5},
		{[]string{"nested", "deep", "v"}, 8},
		{[]string{"nested", "missing"}, 7}, // points at the parent
	}
	for _, tt := range tests {
		if got := d.Root.PosOf(tt.path).Line; got != tt.line {
			t.Errorf("PosOf(%v).Line = %d, want %d", tt.path, got, tt.line)
		}
	}
	want := map[string]any{
		"name": "demo", "version": "1.0.0",
		"list":   []any{"a", map[string]any{"x": uint64(1), "y": true}},
		"nested": map[string]any{"deep": map[string]any{"v": 2.5}},
	}
	got := d.Root.Interface()
	// integers come back as uint64 or int64 depending on sign; normalise for the comparison
	if !reflect.DeepEqual(normalise(got), normalise(want)) {
		t.Fatalf("Interface() = %#v", got)
	}
	if FieldPath([]string{"steps", "2", "with", "url"}) != "steps[2].with.url" {
		t.Fatal("FieldPath")
	}
}

func normalise(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = normalise(x)
		}
	case []any:
		for i, x := range t {
			t[i] = normalise(x)
		}
	case uint64:
		return float64(t)
	case int64:
		return float64(t)
	}
	return v
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, src string
		line      int
	}{
		{"bad value", "ok: 1\nbad: \"open\n", 2},
		{"duplicate key", "a: 1\nb: 2\na: 3\n", 3},
		{"unterminated flow", "a: [1, 2\n", 1},
		{"unknown alias", "a: *nope\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tt.src))
			var ce *caperr.Error
			if !errors.As(err, &ce) {
				t.Fatalf("want *caperr.Error, got %v", err)
			}
			if ce.Code != caperr.InvalidInput || ce.File != "bad.yaml" {
				t.Fatalf("got %+v", ce)
			}
			if ce.Line != tt.line {
				t.Fatalf("line = %d, want %d (%v)", ce.Line, tt.line, err)
			}
		})
	}
}

func TestBlockScalars(t *testing.T) {
	d, err := Parse("b.yaml", []byte("lit: |\n  line one\n  line two\nfold: >\n  a\n  b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Root.Get("lit").Value; got != "line one\nline two\n" {
		t.Fatalf("literal = %q", got)
	}
	if got := d.Root.Get("fold").Value; got != "a b\n" {
		t.Fatalf("folded = %q", got)
	}
}

func TestJSONAndEmpty(t *testing.T) {
	d, err := Parse("x.json", []byte(`{"a": [1, 2], "b": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Root.Kind != Map || d.Root.Get("a").Kind != Seq || d.Root.Get("b").Kind != Null {
		t.Fatalf("JSON not parsed as expected: %#v", d.Root)
	}
	d, err = Parse("e.yaml", []byte("# only a comment\n"))
	if err != nil || d.Root.Kind != Null {
		t.Fatalf("empty doc: %v %#v", err, d)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("a: [1, {b: *x}]"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse("f.yaml", b)
		if err == nil {
			_ = d.Root.Interface()
		}
	})
}
