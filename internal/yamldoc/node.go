package yamldoc

import (
	"fmt"
	"strconv"
	"strings"
)

// Reading a parsed tree: values by key or path, their positions, plain Go
// values.

// Get returns the value of key name in a mapping, or nil.
func (n *Node) Get(name string) *Node {
	if n == nil || n.Kind != Map {
		return nil
	}
	for _, k := range n.Keys {
		if k.Name == name {
			return k.Value
		}
	}
	return nil
}

// KeyPos returns the position of key name in a mapping, or the node's own.
func (n *Node) KeyPos(name string) Pos {
	if n != nil {
		for _, k := range n.Keys {
			if k.Name == name {
				return k.Pos
			}
		}
		return n.Pos
	}
	return Pos{}
}

// Interface converts the tree to plain Go values: map[string]any, []any,
// string, bool, int64, uint64, float64, nil; what JSON Schema validators
// and encoding/json expect.
func (n *Node) Interface() any {
	if n == nil {
		return nil
	}
	switch n.Kind {
	case Map:
		m := make(map[string]any, len(n.Keys))
		for _, k := range n.Keys {
			m[k.Name] = k.Value.Interface()
		}
		return m
	case Seq:
		s := make([]any, len(n.Items))
		for i, it := range n.Items {
			s[i] = it.Interface()
		}
		return s
	case Scalar:
		return n.Value
	}
	return nil
}

// Lookup follows a JSON-pointer-like path of keys and indexes and returns
// the deepest node reached and whether the whole path was found. Errors
// about a missing field can then point at its parent.
func (n *Node) Lookup(path []string) (*Node, bool) {
	cur := n
	for _, seg := range path {
		var next *Node
		switch cur.Kind {
		case Map:
			next = cur.Get(seg)
		case Seq:
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(cur.Items) {
				next = cur.Items[i]
			}
		}
		if next == nil {
			return cur, false
		}
		cur = next
	}
	return cur, true
}

// PosOf returns the best position for a path: a key's own position when
// the path ends in a mapping key, else the value's.
func (n *Node) PosOf(path []string) Pos {
	if len(path) == 0 {
		return n.Pos
	}
	parent, ok := n.Lookup(path[:len(path)-1])
	if !ok {
		return parent.Pos
	}
	last := path[len(path)-1]
	if parent.Kind == Map {
		for _, k := range parent.Keys {
			if k.Name == last {
				return k.Pos
			}
		}
		return parent.Pos
	}
	if v, ok := parent.Lookup([]string{last}); ok {
		return v.Pos
	}
	return parent.Pos
}

// FieldPath renders a path as a readable field name: steps[2].with.url.
func FieldPath(path []string) string {
	var b strings.Builder
	for _, seg := range path {
		if _, err := strconv.Atoi(seg); err == nil {
			fmt.Fprintf(&b, "[%s]", seg)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}
