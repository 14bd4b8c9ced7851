package schema

// Sample builds a value that satisfies simple schemas: every required
// property with a placeholder of its type (enum and const values, and
// defaults, are used when present). Scaffolded tools print it so they
// validate before anyone writes their logic.
func Sample(doc map[string]any) any {
	return sample(doc, 0)
}

func sample(s map[string]any, depth int) any {
	if s == nil || depth > 8 {
		return map[string]any{}
	}
	if v, ok := s["const"]; ok {
		return v
	}
	if v, ok := s["default"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	t := s["type"]
	if ts, ok := t.([]any); ok && len(ts) > 0 {
		t = ts[0]
	}
	switch t {
	case "string":
		return ""
	case "integer", "number":
		if m, ok := s["minimum"]; ok {
			return m
		}
		return 0
	case "boolean":
		return false
	case "array":
		if mi, ok := s["minItems"].(uint64); ok && mi > 0 {
			items, _ := s["items"].(map[string]any)
			out := make([]any, mi)
			for i := range out {
				out[i] = sample(items, depth+1)
			}
			return out
		}
		return []any{}
	case "null":
		return nil
	}
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	req, _ := s["required"].([]any)
	for _, r := range req {
		name, _ := r.(string)
		p, _ := props[name].(map[string]any)
		out[name] = sample(p, depth+1)
	}
	return out
}
