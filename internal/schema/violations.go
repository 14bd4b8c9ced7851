package schema

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/suggest"
)

// What a validation says: the library's errors made into violations, each
// worded for the person who fixes the value.

// Bounds of what one validation reports: its first MaxViolations problems
// (by the place in the value, then a line saying how many more), each
// message at most maxViolationMessage bytes. A tool's 2 MiB list of wrong
// items made a violation each, 2.4 GB and 5 s of the worker's, and a 125 MB
// message (found attacking issue 57).
const (
	MaxViolations       = 100
	maxViolationMessage = 1 << 10
)

// wording is how messages are made: mask is applied to what they quote
// before any cut, yaml adds hints for a value written in YAML, and max
// bounds how many (a tool's data: MaxViolations; a person's file: all).
type wording struct {
	mask func(string) string
	yaml bool
	max  int // violations at most
}

func flatten(ve *jsonschema.ValidationError, schemaDoc, inst any, w wording) []Violation {
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range prune(e) {
				walk(c)
			}
			return
		}
		leaves = append(leaves, e)
	}
	walk(ve)
	sort.SliceStable(leaves, func(i, j int) bool { return comparePlaces(leaves[i].InstanceLocation, leaves[j].InstanceLocation) < 0 })
	// The same leaf can be reached through several keyword paths.
	var out []Violation
	seen := map[string]bool{}
	more := 0
	for i, l := range leaves {
		vs, left := leaf(l, schemaDoc, inst, w, w.max-len(out))
		for _, v := range vs {
			v.Message = envelope.Truncate(w.mask(v.Message), maxViolationMessage)
			if k := strings.Join(v.Path, "/") + "\x00" + v.Message; !seen[k] {
				seen[k] = true
				out = append(out, v)
			}
		}
		if len(out) >= w.max || left > 0 {
			// Not a count of problems: a place left may hold several, or
			// repeat one reached another way.
			more = left + len(leaves) - i - 1
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return comparePlaces(out[i].Path, out[j].Path) < 0 })
	if more > 0 {
		out = append(out, Violation{Message: fmt.Sprintf("and more: %d more errors found after the first %d problems shown", more, len(out))})
	}
	return out
}

// comparePlaces orders places in a value key by key, indexes as numbers
// (items/2 before items/10), and an index before a key.
func comparePlaces(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if c := compareKeys(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// compareKeys is a total order: strings of digits first, by their value
// (by length once leading zeros are gone, then by text), then the rest
// by text.
func compareKeys(a, b string) int {
	na, nb := digits(a), digits(b)
	switch {
	case na && nb:
		ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if c := cmp.Compare(len(ta), len(tb)); c != 0 {
			return c
		}
		if c := strings.Compare(ta, tb); c != 0 {
			return c
		}
	case na:
		return -1
	case nb:
		return 1
	}
	return strings.Compare(a, b)
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// prune drops the branches of an anyOf/oneOf that failed only because the
// value has another type, when some branch accepted the type and failed
// on something more specific: that branch is the one the author meant.
func prune(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
	default:
		return e.Causes
	}
	var specific []*jsonschema.ValidationError
	for _, c := range e.Causes {
		if !onlyTypeError(c) {
			specific = append(specific, c)
		}
	}
	if len(specific) == 0 {
		return e.Causes
	}
	return specific
}

func onlyTypeError(e *jsonschema.ValidationError) bool {
	for len(e.Causes) == 1 {
		e = e.Causes[0]
	}
	_, ok := e.ErrorKind.(*kind.Type)
	return ok && len(e.Causes) == 0
}

// leaf is what one error of the library says, at most room violations of
// it, and how many more it had (an object's unknown fields, or its missing
// ones, are one error: 50,000 unknown keys made as many violations).
func leaf(e *jsonschema.ValidationError, schemaDoc, inst any, w wording, room int) ([]Violation, int) {
	// A value a message quotes: masked, then its start when it is long.
	shown := func(v string) string { return envelope.Truncate(w.mask(v), 200) }
	loc := append([]string(nil), e.InstanceLocation...)
	under := func(field string) []string { return append(append([]string(nil), loc...), field) }
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		allowed := propertyNames(schemaDoc, e.SchemaURL)
		var out []Violation
		// The library lists them in a map's order: sorted, the same ones
		// are shown every time.
		names := slices.Sorted(slices.Values(k.Properties))
		for _, p := range names[:min(room, len(names))] {
			out = append(out, Violation{Path: under(p), Message: fmt.Sprintf("unknown field %q%s", shown(p), allowedPhrase(p, allowed))})
		}
		return out, len(k.Properties) - len(out)
	case *kind.Required:
		var out []Violation
		// A field given beside it that the schema does not declare, spelled
		// nearly so, is the likelier fault (where extra fields are allowed,
		// nothing else names it).
		var extra []string
		if schemaAt(schemaDoc, e.SchemaURL)["additionalProperties"] != false { // else it is named "unknown field"
			declared := propertyNames(schemaDoc, e.SchemaURL)
			extra = slices.DeleteFunc(keysAt(inst, loc), func(k string) bool { return slices.Contains(declared, k) })
		}
		for _, m := range k.Missing[:min(room, len(k.Missing))] {
			msg := fmt.Sprintf("missing required field %q", m)
			if near := suggest.Closest(m, extra, 1); len(near) > 0 {
				msg += fmt.Sprintf(" (%q was given: a typo of it?)", shown(near[0]))
			}
			out = append(out, Violation{Path: under(m), Message: msg})
		}
		return out, len(k.Missing) - len(out)
	}
	return []Violation{leafOne(e, inst, loc, schemaDoc, shown, w.yaml)}, 0
}

// allowedPhrase is what an unknown field's message adds: a near name, or
// the few the schema allows.
func allowedPhrase(field string, allowed []string) string {
	if near := suggest.Phrase(field, allowed); near != "" {
		return near
	}
	if len(allowed) > 0 && len(allowed) <= 10 {
		return " (the schema allows only " + strings.Join(slices.Sorted(slices.Values(allowed)), ", ") + ")"
	}
	return ""
}

// leafOne is the one violation an error of another kind says.
func leafOne(e *jsonschema.ValidationError, inst any, loc []string, schemaDoc any, shown func(string) string, yaml bool) Violation {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		hint := ""
		if yaml {
			hint = quoteHint(k, at(inst, loc))
		}
		if msg, ok := schemaAt(schemaDoc, e.SchemaURL)["patternMessage"].(string); ok && strings.Contains(msg, "duration") && (k.Got == "number" || k.Got == "integer") {
			// Quoting a bare number makes no duration: say what one is (a
			// new user quoted 300 and met the next error).
			hint = fmt.Sprintf(" (write a duration with its unit: %v is %vs)", at(inst, loc), at(inst, loc))
		}
		return Violation{Path: loc, Message: fmt.Sprintf("must be %s, not %s%s", strings.Join(k.Want, " or "), k.Got, hint)}
	case *kind.Enum:
		var want []string
		for _, w := range k.Want {
			want = append(want, fmt.Sprint(w))
		}
		got := fmt.Sprint(k.Got)
		return Violation{Path: loc, Message: fmt.Sprintf("must be one of %s, not %q%s", strings.Join(want, ", "), shown(got), suggest.Phrase(got, want))}
	case *kind.Pattern:
		if msg, ok := schemaAt(schemaDoc, e.SchemaURL)["patternMessage"].(string); ok {
			return Violation{Path: loc, Message: fmt.Sprintf("%q %s", shown(k.Got), msg)}
		}
		return Violation{Path: loc, Message: fmt.Sprintf("%q does not match %s", shown(k.Got), k.Want)}
	case *kind.FalseSchema:
		return Violation{Path: loc, Message: "is not allowed here"}
	}
	return Violation{Path: loc, Message: e.ErrorKind.LocalizedString(printer)}
}

// quoteHint explains a text written as a YAML boolean or number, the
// usual cause of "must be string" (name: true, version: 1.0).
func quoteHint(k *kind.Type, v any) string {
	if text, ok := v.(string); ok && exponent.MatchString(text) && (slices.Contains(k.Want, "number") || slices.Contains(k.Want, "integer")) {
		return fmt.Sprintf(" (%s is text in YAML, which reads a number with an exponent only with a point: write %s, or the number in full)", text, withPoint(text))
	}
	if !slices.Contains(k.Want, "string") {
		return ""
	}
	switch k.Got {
	case "boolean":
		return " (unquoted true and false are booleans in YAML: quote it to keep it text)"
	case "number", "integer":
		return " (an unquoted number is a number in YAML, 1.0 becomes 1: quote it to keep it text)"
	}
	return ""
}

// exponent is a number with an exponent and no point (1e3), which YAML
// 1.1, as plans are read, takes for text.
var exponent = regexp.MustCompile(`^[-+]?[0-9]+[eE][-+]?[0-9]+$`)

// withPoint writes such a number as YAML reads it as one: 1e3 as 1.0e3.
func withPoint(text string) string {
	i := strings.IndexAny(text, "eE")
	return text[:i] + ".0" + text[i:]
}

// propertyNames reads the "properties" keys of the schema object that
// url's fragment points at.
func propertyNames(doc any, url string) []string {
	props, _ := schemaAt(doc, url)["properties"].(map[string]any)
	var names []string
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// keysAt are the keys of the object at path in v (none if it is not one).
func keysAt(v any, path []string) []string {
	m, _ := at(v, path).(map[string]any)
	return slices.Sorted(maps.Keys(m))
}

// schemaAt returns the schema object that url's fragment points at.
func schemaAt(doc any, url string) map[string]any {
	i := strings.IndexByte(url, '#')
	if i < 0 || doc == nil {
		return nil
	}
	cur := doc
	for _, seg := range strings.Split(strings.TrimPrefix(url[i+1:], "/"), "/") {
		if seg == "" {
			continue
		}
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[seg]
	}
	m, _ := cur.(map[string]any)
	return m
}
