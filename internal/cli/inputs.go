package cli

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/yamldoc"
)

// parseInputs merges --inputs-file (YAML or JSON object) and --input k=v
// pairs (later wins). A value is read as JSON (number, bool, object,
// array) unless the schema says the property is a string, so "007" stays
// "007" where a string is wanted.
func parseInputs(pairs []string, file string, props map[string]any) (map[string]any, error) {
	out := map[string]any{}
	if file != "" {
		doc, err := yamldoc.ParseFile(file, file)
		if err != nil {
			return nil, err
		}
		m, ok := doc.Root.Interface().(map[string]any)
		if !ok && doc.Root.Kind != yamldoc.Null {
			return nil, caperr.New(caperr.InvalidInput, "--inputs-file %s must hold a mapping of input names to values", file)
		}
		for k, v := range m {
			out[k] = v
		}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, caperr.New(caperr.InvalidInput, "--input %q is not NAME=VALUE", p)
		}
		out[k] = inputValue(v, props[k])
	}
	return out, nil
}

func inputValue(v string, prop any) any {
	if pm, ok := prop.(map[string]any); ok && pm["type"] == "string" {
		return v
	}
	t := strings.TrimSpace(v)
	if t == "" {
		return v
	}
	switch {
	case t == "true" || t == "false" || t == "null", t[0] == '{', t[0] == '[', t[0] == '"', t[0] == '-' || (t[0] >= '0' && t[0] <= '9'):
		dec := json.NewDecoder(bytes.NewReader([]byte(t)))
		dec.UseNumber()
		var x any
		if dec.Decode(&x) == nil && !dec.More() {
			if n, ok := x.(json.Number); ok {
				if strings.HasPrefix(t, "0") && len(t) > 1 && !strings.HasPrefix(t, "0.") {
					return v // leading zeros: an identifier, not a number
				}
				if i, err := n.Int64(); err == nil {
					return i
				}
				f, _ := n.Float64()
				return f
			}
			return x
		}
	}
	return v
}
