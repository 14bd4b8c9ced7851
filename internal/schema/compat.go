package schema

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Compat reports what keeps it from being proven that every value valid
// under producer is valid under consumer. No issues means compatible.
// It is conservative: a constraint it cannot reason about is an issue.
func Compat(producer, consumer map[string]any) []Issue {
	var out []Issue
	compat(producer, consumer, "", &out, 0)
	return out
}

var analysed = map[string]bool{
	"type": true, "enum": true, "const": true, "properties": true, "required": true, "items": true,
	"additionalProperties": true, "pattern": true, "minLength": true, "maxLength": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minItems": true, "maxItems": true, "allOf": true, "anyOf": true,
}

// annotations never constrain values.
var annotations = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true, "$comment": true,
	"format": true, "$schema": true, "$id": true, "readOnly": true, "writeOnly": true, "deprecated": true,
	"contentMediaType": true, "contentEncoding": true, "patternMessage": true,
}

func constrains(s map[string]any) bool {
	for k := range s {
		if !annotations[k] {
			return true
		}
	}
	return false
}

func add(out *[]Issue, path, format string, args ...any) {
	*out = append(*out, Issue{Path: path, Message: fmt.Sprintf(format, args...)})
}

// unpromised adds an issue that is only what the producer's schema does
// not promise (Issue.Unpromised).
func unpromised(out *[]Issue, path, format string, args ...any) {
	*out = append(*out, Issue{Path: path, Message: fmt.Sprintf(format, args...), Unpromised: true})
}

func child(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func compat(p, c map[string]any, path string, out *[]Issue, depth int) {
	if depth > 32 || !constrains(c) {
		return
	}
	for k := range c {
		if !analysed[k] && !annotations[k] {
			add(out, path, "the consumer's schema uses %q, which capflow cannot check statically", k)
			return
		}
	}
	if all, ok := c["allOf"].([]any); ok {
		for _, sub := range all {
			sm, _ := sub.(map[string]any)
			compat(p, sm, path, out, depth+1)
		}
	}
	if anyOf, ok := c["anyOf"].([]any); ok {
		okOne := false
		for _, sub := range anyOf {
			sm, _ := sub.(map[string]any)
			var tmp []Issue
			compat(p, sm, path, &tmp, depth+1)
			if len(tmp) == 0 {
				okOne = true
				break
			}
		}
		if !okOne {
			add(out, path, "matches no branch of the consumer's anyOf")
		}
	}
	if pany, ok := p["anyOf"].([]any); ok {
		for _, sub := range pany {
			sm, _ := sub.(map[string]any)
			compat(sm, withoutKey(c, "anyOf"), path, out, depth+1)
		}
		return
	}

	pTypes, cTypes := typesOf(p), typesOf(c)
	if cTypes != nil {
		if pTypes == nil {
			unpromised(out, path, "the producer's value may be of any type; %s is required", strings.Join(cTypes, " or "))
			return
		}
		for _, t := range pTypes {
			if !typeIn(t, cTypes) {
				add(out, path, "type mismatch: the producer gives %s, the consumer needs %s", strings.Join(pTypes, " or "), strings.Join(cTypes, " or "))
				return
			}
		}
	}

	if ce, ok := enumOf(c); ok {
		pe, ok := enumOf(p)
		if !ok {
			unpromised(out, path, "the consumer accepts only %s; the producer does not restrict its values", render(ce))
		} else {
			for _, v := range pe {
				if !contains(ce, v) {
					add(out, path, "the producer may give %s, which the consumer's %s does not accept", render([]any{v}), render(ce))
					break
				}
			}
		}
	}
	pe, penum := enumOf(p)
	if pat, ok := c["pattern"].(string); ok && p["pattern"] != pat && !penum {
		unpromised(out, path, "the consumer requires pattern %q, which the producer does not guarantee", pat)
	}
	_ = pe
	bound(p, c, path, out, "minLength", true)
	bound(p, c, path, out, "maxLength", false)
	bound(p, c, path, out, "minimum", true)
	bound(p, c, path, out, "maximum", false)
	bound(p, c, path, out, "exclusiveMinimum", true)
	bound(p, c, path, out, "exclusiveMaximum", false)
	bound(p, c, path, out, "minItems", true)
	bound(p, c, path, out, "maxItems", false)

	// Objects.
	cProps, _ := c["properties"].(map[string]any)
	pProps, _ := p["properties"].(map[string]any)
	pReq := stringSet(p["required"])
	for _, r := range sortedKeys(stringSet(c["required"])) {
		if !pReq[r] {
			if _, described := pProps[r]; described {
				unpromised(out, child(path, r), "required by the consumer but optional in the producer's output (not in its required list)")
			} else {
				unpromised(out, child(path, r), "required by the consumer but the producer does not declare it")
			}
		}
	}
	for _, k := range sortedKeys(cProps) {
		cs, _ := cProps[k].(map[string]any)
		ps, declared := pProps[k].(map[string]any)
		if declared {
			compat(ps, cs, child(path, k), out, depth+1)
		}
	}
	if ap, ok := c["additionalProperties"].(bool); ok && !ap {
		if pap, ok := p["additionalProperties"].(bool); !ok || pap {
			unpromised(out, path, "the consumer forbids extra fields; the producer may add some")
		}
		for _, k := range sortedKeys(pProps) {
			if _, ok := cProps[k]; !ok {
				add(out, child(path, k), "the producer gives this field; the consumer forbids it")
			}
		}
	}
	// Arrays.
	if ci, ok := c["items"].(map[string]any); ok && constrains(ci) {
		pi, ok := p["items"].(map[string]any)
		if !ok {
			unpromised(out, child(path, "[]"), "the consumer constrains list items; the producer does not describe them")
		} else {
			compat(pi, ci, child(path, "[]"), out, depth+1)
		}
	}
}

func withoutKey(m map[string]any, k string) map[string]any {
	out := make(map[string]any, len(m))
	for kk, v := range m {
		if kk != k {
			out[kk] = v
		}
	}
	return out
}

// bound checks a numeric bound: lower bounds of the producer must be at
// least the consumer's, upper bounds at most.
func bound(p, c map[string]any, path string, out *[]Issue, key string, lower bool) {
	cv, ok := num(c[key])
	if !ok {
		return
	}
	pv, ok := num(p[key])
	if !ok {
		if pe, isEnum := enumOf(p); isEnum && allNumbers(pe) {
			return
		}
		unpromised(out, path, "the consumer requires %s %s, which the producer does not guarantee", key, strconv.FormatFloat(cv, 'f', -1, 64))
		return
	}
	if (lower && pv < cv) || (!lower && pv > cv) {
		add(out, path, "the consumer requires %s %s; the producer allows %s", key, strconv.FormatFloat(cv, 'f', -1, 64), strconv.FormatFloat(pv, 'f', -1, 64))
	}
}

func allNumbers(vs []any) bool {
	for _, v := range vs {
		if _, ok := num(v); !ok {
			return false
		}
	}
	return true
}

func num(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case int:
		return float64(n), true
	case interface{ Float64() (float64, error) }:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func typesOf(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		sort.Strings(out)
		return out
	}
	if e, ok := enumOf(s); ok {
		set := map[string]bool{}
		for _, v := range e {
			set[jsonType(v)] = true
		}
		return sortedKeys(set)
	}
	return nil
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		if f, ok := num(x); ok {
			if f == float64(int64(f)) {
				return "integer"
			}
			return "number"
		}
	}
	return "unknown"
}

func typeIn(t string, set []string) bool {
	for _, s := range set {
		if s == t || (t == "integer" && s == "number") {
			return true
		}
	}
	return false
}

func enumOf(s map[string]any) ([]any, bool) {
	if c, ok := s["const"]; ok {
		return []any{c}, true
	}
	if e, ok := s["enum"].([]any); ok {
		return e, true
	}
	return nil, false
}

func contains(set []any, v any) bool {
	for _, x := range set {
		if reflect.DeepEqual(Normalize(x), Normalize(v)) {
			return true
		}
		if a, ok := num(x); ok {
			if b, ok := num(v); ok && a == b {
				return true
			}
		}
	}
	return false
}

func render(vs []any) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, fmt.Sprintf("%v", v))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	if l, ok := v.([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
