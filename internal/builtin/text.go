package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/itchyny/gojq"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/schema"
)

func init() {
	register("json.query", jsonQuery)
	register("text.render", textRender)
}

func jsonQuery(ctx context.Context, in map[string]any, env *Env) (any, error) {
	q, err := gojq.Parse(str(in, "query"))
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "query %q", str(in, "query"))
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "query %q", str(in, "query"))
	}
	var input any
	switch {
	case in["path"] != nil:
		p, err := env.Path("path", str(in, "path"))
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, caperr.Wrap(caperr.InvalidInput, err, "read %s", str(in, "path"))
		}
		if err := json.Unmarshal(b, &input); err != nil {
			return nil, caperr.Wrap(caperr.InvalidInput, err, "%s is not JSON", str(in, "path"))
		}
	default:
		input = jqValue(in["input"])
	}
	results := []any{}
	iter := code.RunWithContext(ctx, input)
	for {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := v.(error); isErr {
			if _, halt := err.(*gojq.HaltError); halt {
				break
			}
			return nil, caperr.Wrap(caperr.InvalidInput, err, "query %q", str(in, "query"))
		}
		results = append(results, v)
		if len(results) > 100000 {
			return nil, caperr.New(caperr.InvalidInput, "query %q yields more than 100000 results", str(in, "query"))
		}
	}
	env.Feedback.Info("query", fmt.Sprintf("%d results", len(results)))
	var first any
	if len(results) > 0 {
		first = results[0]
	}
	return map[string]any{"result": first, "results": results, "count": len(results)}, nil
}

// jqValue converts numbers to the types gojq accepts (int, float64).
func jqValue(v any) any {
	v = schema.Normalize(v)
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = jqValue(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = jqValue(x)
		}
		return out
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return int(i)
		}
		f, _ := t.Float64()
		return f
	case int64:
		return int(t)
	case uint64:
		return float64(t)
	}
	return v
}

func textRender(_ context.Context, in map[string]any, env *Env) (any, error) {
	tmpl, err := template.New("text").Option("missingkey=error").Funcs(template.FuncMap{
		"upper": strings.ToUpper, "lower": strings.ToLower, "trim": strings.TrimSpace,
		"join": func(sep string, xs []any) string {
			var s []string
			for _, x := range xs {
				s = append(s, fmt.Sprint(x))
			}
			return strings.Join(s, sep)
		},
		"json": func(v any) (string, error) { b, err := json.Marshal(v); return string(b), err },
	}).Parse(str(in, "template"))
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "template")
	}
	var buf bytes.Buffer
	values, _ := in["values"].(map[string]any)
	if values == nil {
		values = map[string]any{}
	}
	if err := tmpl.Execute(&buf, values); err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "render")
	}
	out := map[string]any{"text": buf.String(), "bytes": buf.Len()}
	if op := str(in, "output_path"); op != "" {
		p, err := env.Path("output_path", op)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, caperr.Wrap(caperr.ToolFailure, err, "create folder")
		}
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return nil, caperr.Wrap(caperr.ToolFailure, err, "write %s", op)
		}
		out["path"] = p
	}
	env.Feedback.Info("render", fmt.Sprintf("rendered %d bytes", buf.Len()))
	return out, nil
}
