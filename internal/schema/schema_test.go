package schema

import (
	"strings"
	"testing"

	"github.com/capflow/capflow/schemas"
)

func TestManifestSchemaViolations(t *testing.T) {
	s := Embedded("tool-manifest.schema.json", schemas.Must("tool-manifest.schema.json"))
	inst := map[string]any{
		"name": "Bad Name", "version": float64(1), "description": true,
		"capabilites":  []any{"x.y"},
		"entrypoint":   map[string]any{"type": "shell", "comand": []any{"a"}},
		"capabilities": []any{"Video.Convert"},
		"priority":     "high",
		"timeouts":     map[string]any{"start_to_close": float64(300)},
	}
	got := s.Validate(inst)
	joined := ""
	for _, v := range got {
		joined += strings.Join(v.Path, "/") + ": " + v.Message + "\n"
	}
	for _, want := range []string{
		`capabilites: unknown field "capabilites" (did you mean "capabilities"?)`,
		`entrypoint/comand: unknown field "comand" (did you mean "command"?)`,
		`entrypoint/type: must be one of command, http, builtin, mcp, not "shell"`,
		`priority: must be integer, not string`,
		// version: 1.0 and description: true as YAML reads them.
		`version: must be string, not number (an unquoted number is a number in YAML, 1.0 becomes 1: quote it to keep it text)`,
		`description: must be string, not boolean (unquoted true and false are booleans in YAML: quote it to keep it text)`,
		// A number for a duration: quoting it makes no duration either.
		`timeouts/start_to_close: must be string, not number (write a duration with its unit: 300 is 300s)`,
		`capabilities/0: `,
		`name: `,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("missing violation %q in:\n%s", want, joined)
		}
	}
}

func TestCompileUserSchema(t *testing.T) {
	if _, v := Compile(map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}); len(v) > 0 {
		t.Fatalf("valid schema rejected: %v", v)
	}
	_, v := Compile(map[string]any{"type": "objekt", "properties": map[string]any{"a": map[string]any{"minLength": -1}}})
	if len(v) < 2 {
		t.Fatalf("want violations for type and minLength, got %v", v)
	}
	_, v = Compile(map[string]any{"$ref": "http://example.com/x.json"})
	if len(v) != 1 || !strings.Contains(v[0].Message, "not allowed") {
		t.Fatalf("external ref: %v", v)
	}
}

// A required field missing beside one the schema does not declare,
// spelled nearly so, names it, where extra fields are allowed (and
// nothing else would); where they are not, "unknown field" says it once.
func TestMissingBesideANearName(t *testing.T) {
	props := map[string]any{"text": map[string]any{"type": "string"}}
	cases := []struct {
		schema map[string]any
		want   string
	}{
		{map[string]any{"type": "object", "required": []any{"text"}, "properties": props},
			`text: missing required field "text" ("txt" was given: a typo of it?)`},
		{map[string]any{"type": "object", "required": []any{"text"}, "properties": props, "additionalProperties": false},
			`text: missing required field "text"|txt: unknown field "txt" (did you mean "text"?)`},
		{map[string]any{"type": "object", "properties": map[string]any{"inner": map[string]any{"type": "object", "required": []any{"text"}, "properties": props}}},
			`inner/text: missing required field "text" ("txt" was given: a typo of it?)`},
	}
	for i, c := range cases {
		s, vs := Compile(c.schema)
		if len(vs) > 0 {
			t.Fatal(vs)
		}
		inst := map[string]any{"txt": "a"}
		if i == 2 {
			inst = map[string]any{"inner": map[string]any{"txt": "a"}}
		}
		var got []string
		for _, v := range s.Validate(inst) {
			got = append(got, strings.Join(v.Path, "/")+": "+v.Message)
		}
		if strings.Join(got, "|") != c.want {
			t.Errorf("case %d: %q, want %q", i, strings.Join(got, "|"), c.want)
		}
	}
}

// A number written with an exponent and no point is text to YAML; where a
// number is wanted, the problem says how to write it.
func TestExponentTextSaysHowToWriteTheNumber(t *testing.T) {
	s, v := Compile(map[string]any{"type": "object", "properties": map[string]any{
		"n": map[string]any{"type": "number"}, "m": map[string]any{"type": "integer"}, "t": map[string]any{"type": "number"}}})
	if len(v) > 0 {
		t.Fatal(v)
	}
	joined := ""
	for _, v := range s.Validate(map[string]any{"n": "1e3", "m": "-2E+5", "t": "ten"}) {
		joined += strings.Join(v.Path, "/") + ": " + v.Message + "\n"
	}
	for _, want := range []string{
		"n: must be number, not string (1e3 is text in YAML, which reads a number with an exponent only with a point: write 1.0e3, or the number in full)",
		"m: must be integer, not string (-2E+5 is text in YAML, which reads a number with an exponent only with a point: write -2.0E+5, or the number in full)",
		"t: must be number, not string\n",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("missing %q in:\n%s", want, joined)
		}
	}
}
