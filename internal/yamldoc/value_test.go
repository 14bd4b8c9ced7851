package yamldoc

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FromValue gives the tree the value's JSON text parses to.
func TestFromValueMatchesParsedJSON(t *testing.T) {
	for _, src := range []string{
		`{"name":"p","steps":[{"id":"a","with":{"n":3,"f":1.5,"neg":-2,"big":12345678901234,"t":true,"z":null,"s":"x: y"}}]}`,
		`[]`, `{}`, `"text"`, `0`, `[1, [2, [3, {"k": []}]]]`,
	} {
		var v any
		if err := json.Unmarshal([]byte(src), &v); err != nil {
			t.Fatal(err)
		}
		text, _ := json.Marshal(v)
		want, err := Parse("p.json", text)
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := FromValue("p.json", v)
		if !ok || err != nil {
			t.Fatalf("%s: ok %v, %v", src, ok, err)
		}
		if !reflect.DeepEqual(got.Root.Interface(), want.Root.Interface()) {
			t.Errorf("%s:\n got %#v\nwant %#v", src, got.Root.Interface(), want.Root.Interface())
		}
	}
}

func TestFromValueBoundsAndUnknownTypes(t *testing.T) {
	deep := any("x")
	for range MaxDepth + 1 {
		deep = []any{deep}
	}
	if _, ok, err := FromValue("p", deep); !ok || err == nil || !strings.Contains(err.Error(), "nesting deeper") {
		t.Errorf("deep value: ok %v, %v", ok, err)
	}
	if _, ok, _ := FromValue("p", map[string]any{"k": struct{}{}}); ok {
		t.Error("a struct was taken as a JSON value")
	}
}
