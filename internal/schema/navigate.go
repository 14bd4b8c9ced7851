package schema

import (
	"fmt"
	"strings"
)

// Navigate follows a data path (keys and list indexes) into a schema.
// It returns the sub-schema, whether the value is guaranteed to be there,
// and an issue when the path cannot exist.
func Navigate(s map[string]any, path []string) (sub map[string]any, guaranteed bool, issue string) {
	sub, guaranteed, issue, _ = navigate(s, path)
	return sub, guaranteed, issue
}

// Undeclared is the field of path that s does not declare (where
// Navigate refuses the path for that reason) and the fields declared
// beside it, for a "did you mean"; nil when the path is refused for
// another reason, or not at all.
func Undeclared(s map[string]any, path []string) *Missing {
	_, _, _, m := navigate(s, path)
	return m
}

// Missing is a field a schema does not declare, and those it does there.
type Missing struct {
	Field    string
	Declared []string
}

func navigate(s map[string]any, path []string) (sub map[string]any, guaranteed bool, issue string, missing *Missing) {
	cur, guaranteed := s, true
	for i, seg := range path {
		where := strings.Join(path[:i+1], ".")
		if cur == nil {
			return nil, false, "", nil
		}
		types := typesOf(cur)
		if props, ok := cur["properties"].(map[string]any); ok || typeIn("object", types) {
			if ps, ok := props[seg].(map[string]any); ok {
				if !stringSet(cur["required"])[seg] {
					guaranteed = false
				}
				cur = ps
				continue
			}
			if ap, ok := cur["additionalProperties"]; ok {
				if b, isBool := ap.(bool); isBool && !b {
					return nil, false, fmt.Sprintf("the output has no field %q (its schema declares %s)", where, Declared(sortedKeys(props))), &Missing{seg, sortedKeys(props)}
				}
				apm, _ := ap.(map[string]any)
				cur, guaranteed = apm, false
				continue
			}
			if len(types) > 0 && !typeIn("object", types) && !typeIn("array", types) {
				return nil, false, fmt.Sprintf("%q is a %s, not an object", strings.Join(path[:i], "."), strings.Join(types, " or ")), nil
			}
			if props != nil {
				return nil, false, fmt.Sprintf("the output schema does not declare %q (it declares %s)", where, Declared(sortedKeys(props))), &Missing{seg, sortedKeys(props)}
			}
			cur, guaranteed = nil, false
			continue
		}
		if typeIn("array", types) || cur["items"] != nil {
			items, _ := cur["items"].(map[string]any)
			idx := -1
			fmt.Sscanf(seg, "%d", &idx)
			if idx < 0 {
				return nil, false, fmt.Sprintf("%q is a list; %q is not an index", strings.Join(path[:i], "."), seg), nil
			}
			if mi, ok := num(cur["minItems"]); !ok || int(mi) <= idx {
				guaranteed = false
			}
			cur = items
			continue
		}
		if len(types) > 0 {
			return nil, false, fmt.Sprintf("%q is a %s and has no field %q", strings.Join(path[:i], "."), strings.Join(types, " or "), seg), nil
		}
		cur, guaranteed = nil, false
	}
	return cur, guaranteed, "", nil
}

// Declared lists the fields a schema declares, "no field" for none.
func Declared(fields []string) string {
	if len(fields) == 0 {
		return "no field"
	}
	return strings.Join(fields, ", ")
}
