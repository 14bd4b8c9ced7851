package schema

import (
	"strconv"
	"strings"
)

// inPlace are the keywords whose subschemas apply to the same instance
// as their parent: a cycle through them alone (x: {$ref: y}, y: {anyOf:
// [{$ref: x}]}) never reaches a smaller part of the instance, so
// validating anything against it does not end. A cycle that passes
// through properties, items and the like is a recursive schema, and fine.
var inPlace = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "not": true,
	"if": true, "then": true, "else": true, "dependentSchemas": true, "$ref": true}

// refCycle finds a cycle of in-place references in doc (local "#/..."
// references only: a compiled schema has no other kind) and returns the
// path, inside doc, of the $ref that closes it, with the cycle written out.
func refCycle(doc any) (closing []string, cycle string) {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(ptr string, at []string) bool
	visit = func(ptr string, at []string) bool {
		switch state[ptr] {
		case open:
			i := len(stack) - 1
			for i > 0 && stack[i] != ptr {
				i--
			}
			if at == nil {
				at = pathOf(ptr)
			}
			closing, cycle = at, strings.Join(append(stack[i:], ptr), " → ")
			return true
		case done:
			return false
		}
		state[ptr] = open
		stack = append(stack, ptr)
		for _, e := range inPlaceEdges(doc, ptr) {
			if visit(e.target, e.at) {
				return true
			}
		}
		stack = stack[:len(stack)-1]
		state[ptr] = done
		return false
	}
	for _, ptr := range subschemas(doc, "#", nil) {
		if visit(ptr, nil) {
			return closing, cycle
		}
	}
	return nil, ""
}

var dataKeyword = map[string]bool{"const": true, "enum": true, "default": true, "examples": true}

type edge struct {
	target string
	at     []string // the path of the keyword that makes the edge
}

// inPlaceEdges lists the schemas applied in place by the schema at ptr.
func inPlaceEdges(doc any, ptr string) []edge {
	m, ok := resolve(doc, ptr).(map[string]any)
	if !ok {
		return nil
	}
	base := pathOf(ptr)
	var out []edge
	for _, k := range sortedKeys(m) {
		v := m[k]
		if !inPlace[k] {
			continue
		}
		switch t := v.(type) {
		case string: // $ref
			if strings.HasPrefix(t, "#/") || t == "#" {
				out = append(out, edge{t, append(append([]string(nil), base...), k)})
			}
		case []any:
			for i := range t {
				out = append(out, edge{ptr + "/" + k + "/" + strconv.Itoa(i), nil})
			}
		case map[string]any:
			if k == "dependentSchemas" {
				for _, name := range sortedKeys(t) {
					out = append(out, edge{ptr + "/" + k + "/" + escape(name), nil})
				}
			} else {
				out = append(out, edge{ptr + "/" + k, nil})
			}
		}
	}
	return out
}

// subschemas lists every object in doc as a pointer (a superset of its
// subschemas: enough to start a search from each), leaving out values
// that are data, not schemas.
func subschemas(v any, ptr string, out []string) []string {
	switch t := v.(type) {
	case map[string]any:
		out = append(out, ptr)
		for _, k := range sortedKeys(t) {
			if dataKeyword[k] {
				continue
			}
			out = subschemas(t[k], ptr+"/"+escape(k), out)
		}
	case []any:
		for i, x := range t {
			out = subschemas(x, ptr+"/"+strconv.Itoa(i), out)
		}
	}
	return out
}

func resolve(doc any, ptr string) any { return at(doc, pathOf(ptr)) }

// at is the value at path (keys and list indexes) in v, nil if none.
func at(v any, path []string) any {
	cur := v
	for _, tok := range path {
		switch t := cur.(type) {
		case map[string]any:
			cur = t[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil
			}
			cur = t[i]
		default:
			return nil
		}
	}
	return cur
}

// pathOf splits a "#/a/b" pointer into its unescaped tokens.
func pathOf(ptr string) []string {
	rest := strings.TrimPrefix(strings.TrimPrefix(ptr, "#"), "/")
	if rest == "" {
		return nil
	}
	toks := strings.Split(rest, "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
