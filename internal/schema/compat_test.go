package schema

import (
	"strings"
	"testing"
)

func obj(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestCompat(t *testing.T) {
	str := obj("type", "string")
	integer := obj("type", "integer")
	number := obj("type", "number")
	tests := []struct {
		name       string
		prod, cons map[string]any
		want       string // "" = compatible; else a fragment of the first issue
	}{
		{"same type", str, str, ""},
		{"integer into number", integer, number, ""},
		{"number into integer", number, integer, "type mismatch: the producer gives number, the consumer needs integer"},
		{"string into integer", str, integer, "type mismatch"},
		{"untyped into string", obj("description", "anything"), str, "may be of any type"},
		{"anything into unconstrained", str, obj("description", "x"), ""},
		{"enum subset", obj("enum", []any{"a", "b"}), obj("enum", []any{"a", "b", "c"}), ""},
		{"enum not subset", obj("enum", []any{"a", "z"}), obj("enum", []any{"a", "b"}), "may give [z]"},
		{"free string into enum", str, obj("type", "string", "enum", []any{"a"}), "accepts only [a]"},
		{"minimum ok", obj("type", "integer", "minimum", 5.0), obj("type", "integer", "minimum", 1.0), ""},
		{"minimum unproven", integer, obj("type", "integer", "minimum", 1.0), "minimum 1"},
		{"pattern unproven", str, obj("type", "string", "pattern", "^a"), "pattern"},
		{"required field optional in producer",
			obj("type", "object", "properties", obj("a", str)), obj("type", "object", "required", []any{"a"}), "optional in the producer"},
		{"nested mismatch",
			obj("type", "object", "required", []any{"a"}, "properties", obj("a", integer)),
			obj("type", "object", "required", []any{"a"}, "properties", obj("a", str)), "a: type mismatch"},
		{"items", obj("type", "array", "items", integer), obj("type", "array", "items", str), "[]: type mismatch"},
		{"unanalysable", str, obj("not", str), `uses "not"`},
		{"anyOf consumer", integer, obj("anyOf", []any{str, integer}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compat(tt.prod, tt.cons)
			if tt.want == "" {
				if len(got) > 0 {
					t.Fatalf("want compatible, got %v", got)
				}
				return
			}
			if len(got) == 0 || !strings.Contains(got[0].String(), tt.want) {
				t.Fatalf("want %q, got %v", tt.want, got)
			}
		})
	}
}

func TestNavigate(t *testing.T) {
	out := obj("type", "object", "required", []any{"files", "sha256"}, "properties", obj(
		"sha256", obj("type", "string"),
		"files", obj("type", "array", "items", obj("type", "string")),
		"path", obj("type", "string")))
	if s, g, iss := Navigate(out, []string{"sha256"}); iss != "" || !g || s["type"] != "string" {
		t.Fatalf("sha256: %v %v %q", s, g, iss)
	}
	if _, g, _ := Navigate(out, []string{"path"}); g {
		t.Fatal("optional field reported as guaranteed")
	}
	if s, g, _ := Navigate(out, []string{"files", "0"}); g || s["type"] != "string" {
		t.Fatal("list index without minItems is not guaranteed")
	}
	if _, _, iss := Navigate(out, []string{"nope"}); !strings.Contains(iss, `does not declare "nope"`) {
		t.Fatalf("missing field: %q", iss)
	}
	if _, _, iss := Navigate(out, []string{"sha256", "x"}); !strings.Contains(iss, "is a string") {
		t.Fatalf("scalar path: %q", iss)
	}
	// A scaffolded tool's schema with no field yet says so in words.
	if _, _, iss := Navigate(obj("type", "object", "properties", obj()), []string{"sig"}); !strings.HasSuffix(iss, `does not declare "sig" (it declares no field)`) {
		t.Fatalf("no field declared: %q", iss)
	}
}

// What the producer only does not promise is told apart from a conflict:
// the data-flow check then names the producer as what to fix.
func TestUnpromisedIsToldApart(t *testing.T) {
	integer := obj("type", "integer")
	for _, c := range []struct {
		name       string
		prod, cons map[string]any
		unpromised bool
	}{
		{"untyped into integer", obj("description", "anything"), integer, true},
		{"an optional field", obj("type", "object", "properties", obj("n", integer)), obj("type", "object", "required", []any{"n"}, "properties", obj("n", integer)), true},
		{"a type mismatch", obj("type", "string"), integer, false},
	} {
		is := Compat(c.prod, c.cons)
		if len(is) == 0 || is[0].Unpromised != c.unpromised {
			t.Errorf("%s: %+v, want unpromised %v", c.name, is, c.unpromised)
		}
	}
}
