package expr

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// orderedAdapter converts JSON objects into CEL maps that iterate their keys
// in sorted order. Go's map order is random, and a condition such as
// `inputs.m.map(k, k)[0]` must give the same answer every time a workflow
// replays it.
type orderedAdapter struct{ types.Adapter }

func (a orderedAdapter) NativeToValue(v any) ref.Val {
	if m, ok := v.(map[string]any); ok {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return orderedMap{Mapper: types.NewStringInterfaceMap(a, m), keys: keys}
	}
	return a.Adapter.NativeToValue(v)
}

// orderedMap is a map whose iteration follows sorted keys. It exposes no
// Fold method, so comprehensions use its Iterator.
type orderedMap struct {
	traits.Mapper
	keys []string
}

func (m orderedMap) Iterator() traits.Iterator { return &keyIterator{keys: m.keys} }

type keyIterator struct {
	keys []string
	i    int
}

func (it *keyIterator) HasNext() ref.Val { return types.Bool(it.i < len(it.keys)) }

func (it *keyIterator) Next() ref.Val {
	if it.i >= len(it.keys) {
		return types.NewErr("no more keys")
	}
	k := it.keys[it.i]
	it.i++
	return types.String(k)
}

func (it *keyIterator) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("an iterator has no native form")
}
func (it *keyIterator) ConvertToType(ref.Type) ref.Val {
	return types.NewErr("an iterator has no type conversion")
}
func (it *keyIterator) Equal(ref.Val) ref.Val { return types.False }
func (it *keyIterator) Type() ref.Type        { return types.IteratorType }
func (it *keyIterator) Value() any            { return nil }
