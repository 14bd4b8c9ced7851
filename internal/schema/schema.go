// Package schema compiles JSON Schema 2020-12 documents and turns
// validation failures into violations that carry a field path, so callers
// can map them back to file positions.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// Violation is one problem, at a path inside the validated value.
type Violation struct {
	Path    []string
	Message string
}

// Schema is a compiled schema plus its source document, which is used to
// suggest field names.
type Schema struct {
	compiled *jsonschema.Schema
	doc      any
	url      string
}

const userURL = "mem:///schema.json"

// Compile compiles a user-supplied schema document (e.g. a tool's
// input_schema). Violations point inside the schema document itself.
func Compile(doc any) (*Schema, []Violation) {
	return compile(userURL, doc)
}

func compile(url string, doc any) (*Schema, []Violation) {
	doc = Normalize(doc)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Never reach out to the network or disk for $ref: a schema must be
	// self-contained, or the check would depend on where it runs.
	c.UseLoader(denyLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, []Violation{{Message: err.Error()}}
	}
	sch, err := c.Compile(url)
	if err != nil {
		var sve *jsonschema.SchemaValidationError
		var ve *jsonschema.ValidationError
		if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
			// Suggestions inside user schemas are not offered: the
			// metaschema allows any keyword.
			return nil, flatten(ve, nil, nil, wording{mask: func(s string) string { return s }, max: math.MaxInt})
		}
		msg := err.Error()
		msg = strings.ReplaceAll(msg, userURL, "schema")
		return nil, []Violation{{Message: msg}}
	}
	if at, cycle := refCycle(doc); cycle != "" {
		return nil, []Violation{{Path: at, Message: "$ref cycle: " + cycle + " (validating against it would never end)"}}
	}
	return &Schema{compiled: sch, doc: doc, url: url}, nil
}

type denyLoader struct{}

func (denyLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed: schemas must be self-contained", url)
}

var embedded sync.Map

// Embedded compiles one of capflow's own schemas (cached). It panics on
// failure: a broken built-in schema is a build defect caught by tests.
func Embedded(name string, src []byte) *Schema {
	if s, ok := embedded.Load(name); ok {
		return s.(*Schema)
	}
	var doc any
	if err := json.Unmarshal(src, &doc); err != nil {
		panic(fmt.Sprintf("schema %s: %v", name, err))
	}
	s, v := compile("mem:///"+name, doc)
	if len(v) > 0 {
		panic(fmt.Sprintf("schema %s: %v", name, v))
	}
	embedded.Store(name, s)
	return s
}

// Doc returns the schema document as plain values.
func (s *Schema) Doc() any { return s.doc }

// Validate checks v (a plan's or a manifest's, written by a person) and
// returns every violation, sorted by place.
func (s *Schema) Validate(v any) []Violation {
	return s.validate(v, wording{mask: func(s string) string { return s }, yaml: true, max: math.MaxInt})
}

// ValidateJSON is Validate for a value that came as JSON (a tool's data):
// at most MaxViolations, then a line saying how many more; its messages
// give no YAML hints, and mask (a redactor's) is applied to
// each value a message quotes and to each message before either is cut: a
// secret a cut split in two would no longer match its whole, and its
// first part would be shown.
func (s *Schema) ValidateJSON(v any, mask func(string) string) []Violation {
	if mask == nil {
		mask = func(s string) string { return s }
	}
	return s.validate(v, wording{mask: mask, max: MaxViolations})
}

func (s *Schema) validate(v any, w wording) []Violation {
	inst := Normalize(v)
	err := s.compiled.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Violation{{Message: err.Error()}}
	}
	return flatten(ve, s.doc, inst, w)
}

// Normalize converts any JSON-like value (structs, typed maps, json.Number)
// into the plain form the validator needs, via a JSON round trip when the
// value is not already plain.
func Normalize(v any) any {
	if isPlain(v) {
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if dec.Decode(&out) != nil {
		return v
	}
	return out
}

// JSONType reports whether v is, at its top, of a type a JSON decoder
// gives (or a whole number's Go type, as capflow passes integers): a
// value Normalize leaves as it is when everything inside is too.
// text.render's wire (internal/builtin/textwire.go) writes each of these
// itself and sends anything else through Normalize: a type added here
// needs its case there, or that recursion never ends
// (TestRenderRequestsRoundTrip sends one of each).
func JSONType(v any) bool {
	switch v.(type) {
	case nil, string, bool, float64, int64, uint64, int, json.Number, map[string]any, []any:
		return true
	}
	return false
}

func isPlain(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for _, x := range t {
			if !isPlain(x) {
				return false
			}
		}
	case []any:
		for _, x := range t {
			if !isPlain(x) {
				return false
			}
		}
	}
	return JSONType(v)
}
