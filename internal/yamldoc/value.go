package yamldoc

import (
	"encoding/json"
	"maps"
	"math"
	"slices"

	"github.com/capflow/capflow/internal/caperr"
)

// FromValue builds a document from a JSON-like value (a workflow input
// as encoding/json decodes it, or maps built in code) without printing and
// parsing it again: the same tree the JSON text would give, keys sorted as
// encoding/json writes them, no positions. ok is false for a value holding
// a type it does not know: the caller then parses the value's JSON.
func FromValue(file string, v any) (doc *Doc, ok bool, err error) {
	c := &valueConverter{file: file}
	root, ok := c.node(v, 0)
	if !ok || c.err != nil {
		return nil, ok, c.err
	}
	return &Doc{File: file, Root: root}, true, nil
}

type valueConverter struct {
	file  string
	nodes int64
	err   error
}

func (c *valueConverter) fail(format string, args ...any) (*Node, bool) {
	if c.err == nil {
		c.err = caperr.New(caperr.InvalidInput, format, args...).At(c.file, 0, 0, "")
	}
	return nil, true
}

func (c *valueConverter) node(v any, depth int) (*Node, bool) {
	if depth > MaxDepth {
		return c.fail("nesting deeper than %d levels", MaxDepth)
	}
	if c.nodes++; c.nodes > MaxNodes {
		return c.fail("document holds more than %d values", MaxNodes)
	}
	switch t := v.(type) {
	case nil:
		return &Node{Kind: Null}, true
	case map[string]any:
		out := &Node{Kind: Map, Keys: make([]Key, 0, len(t))}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			n, ok := c.node(t[k], depth+1)
			if !ok || c.err != nil {
				return nil, ok
			}
			out.Keys = append(out.Keys, Key{Name: k, Value: n})
		}
		return out, true
	case []any:
		out := &Node{Kind: Seq, Items: make([]*Node, 0, len(t))}
		for _, x := range t {
			n, ok := c.node(x, depth+1)
			if !ok || c.err != nil {
				return nil, ok
			}
			out.Items = append(out.Items, n)
		}
		return out, true
	}
	return scalarOf(v)
}

// scalarOf is a scalar as the YAML parser reads its JSON text: integers
// as uint64, negative ones as int64, other numbers as float64.
func scalarOf(v any) (*Node, bool) {
	switch t := v.(type) {
	case string, bool, uint64:
		return &Node{Kind: Scalar, Value: t}, true
	case int:
		return scalarOf(int64(t))
	case int64:
		if t >= 0 {
			return &Node{Kind: Scalar, Value: uint64(t)}, true
		}
		return &Node{Kind: Scalar, Value: t}, true
	case float64:
		switch {
		case t != math.Trunc(t) || math.IsInf(t, 0):
		case t >= 0 && t < 1<<64:
			return &Node{Kind: Scalar, Value: uint64(t)}, true
		case t < 0 && t >= -1<<63:
			return &Node{Kind: Scalar, Value: int64(t)}, true
		}
		return &Node{Kind: Scalar, Value: t}, !math.IsInf(t, 0) && !math.IsNaN(t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return scalarOf(i)
		}
		if f, err := t.Float64(); err == nil {
			return scalarOf(f)
		}
	}
	return nil, false
}
