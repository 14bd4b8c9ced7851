package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRefCycles(t *testing.T) {
	cases := []struct {
		name, doc, want string // want: the cycle, "" when the schema is fine
		at              string
	}{
		{"two refs", `{"properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"$ref": "#/$defs/y"}, "y": {"$ref": "#/$defs/x"}}}`,
			"#/$defs/x → #/$defs/y → #/$defs/x", "$defs.y.$ref"},
		{"through anyOf", `{"$defs": {"x": {"anyOf": [{"$ref": "#/$defs/x"}, {"type": "string"}]}}}`,
			"#/$defs/x → #/$defs/x/anyOf/0 → #/$defs/x", "$defs.x.anyOf.0.$ref"},
		{"the root itself", `{"allOf": [{"$ref": "#"}]}`, "# → #/allOf/0 → #", "allOf.0.$ref"},
		{"a tree is recursive, not a cycle", `{"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}`, "", ""},
		{"data that looks like a ref", `{"const": {"$ref": "#"}, "default": {"allOf": [{"$ref": "#"}]}}`, "", ""},
		{"a chain without a loop", `{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer"}}}`, "", ""},
	}
	for _, c := range cases {
		var doc any
		if err := json.Unmarshal([]byte(c.doc), &doc); err != nil {
			t.Fatal(err)
		}
		at, cycle := refCycle(doc)
		if cycle != c.want || strings.Join(at, ".") != c.at {
			t.Errorf("%s: got %q at %q, want %q at %q", c.name, cycle, strings.Join(at, "."), c.want, c.at)
		}
		if _, vs := Compile(doc); (len(vs) > 0) != (c.want != "") {
			t.Errorf("%s: Compile says %v", c.name, vs)
		}
	}
}
