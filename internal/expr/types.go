package expr

import (
	"sort"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// schemaTypes is a CEL type provider over JSON Schemas: every object
// schema with properties becomes a struct type whose fields are exactly
// the declared properties, so reading an undeclared field is a type error.
type schemaTypes struct {
	types.Provider
	structs map[string]map[string]*types.Type
}

func (p *schemaTypes) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.structs[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Provider.FindStructType(name)
}

func (p *schemaTypes) FindStructFieldNames(name string) ([]string, bool) {
	fs, ok := p.structs[name]
	if !ok {
		return p.Provider.FindStructFieldNames(name)
	}
	out := make([]string, 0, len(fs))
	for f := range fs {
		out = append(out, f)
	}
	sort.Strings(out)
	return out, true
}

func (p *schemaTypes) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	fs, ok := p.structs[name]
	if !ok {
		return p.Provider.FindStructFieldType(name, field)
	}
	t, ok := fs[field]
	if !ok {
		return nil, false
	}
	// Checking only: values are evaluated by Eval with dynamic types.
	return &types.FieldType{Type: t,
		IsSet:   func(any) bool { return false },
		GetFrom: func(any) (any, error) { return nil, nil }}, true
}

func (p *schemaTypes) NewValue(name string, fields map[string]ref.Val) ref.Val {
	return p.Provider.NewValue(name, fields)
}

// typeOf maps a JSON Schema to a CEL type, registering struct types.
func (p *schemaTypes) typeOf(name string, s map[string]any) *types.Type {
	if s == nil {
		return types.DynType
	}
	t, _ := s["type"].(string)
	switch t {
	case "string":
		return types.StringType
	case "integer":
		return types.IntType
	case "number":
		return types.DoubleType
	case "boolean":
		return types.BoolType
	case "null":
		return types.NullType
	case "array":
		items, _ := s["items"].(map[string]any)
		return types.NewListType(p.typeOf(name+".item", items))
	case "object", "":
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			if t == "object" {
				return types.NewMapType(types.StringType, types.DynType)
			}
			return types.DynType
		}
		fields := map[string]*types.Type{}
		p.structs[name] = fields
		for k, v := range props {
			ps, _ := v.(map[string]any)
			fields[k] = p.typeOf(name+"."+k, ps)
		}
		return types.NewObjectType(name)
	}
	return types.DynType
}

// object registers a struct type with the given fields.
func (p *schemaTypes) object(name string, fields map[string]*types.Type) *types.Type {
	p.structs[name] = fields
	return types.NewObjectType(name)
}

// typedEnv is the checking environment of a condition.
func typedEnv(v Vars) (*cel.Env, error) {
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, err
	}
	p := &schemaTypes{Provider: reg, structs: map[string]map[string]*types.Type{}}
	in := map[string]*types.Type{}
	for name, s := range v.Inputs {
		in[name] = p.typeOf("capflow.inputs."+name, s)
	}
	steps := map[string]*types.Type{}
	for id, s := range v.Steps {
		steps[id] = p.object("capflow.steps."+id, map[string]*types.Type{
			"data":    p.typeOf("capflow.steps."+id+".data", s),
			"success": types.BoolType,
			"status":  types.StringType,
		})
	}
	opts := []cel.EnvOption{
		cel.CustomTypeProvider(p),
		cel.Variable("inputs", p.object("capflow.inputs", in)),
		cel.Variable("steps", p.object("capflow.steps", steps)),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
	}
	if v.ItemName != "" {
		opts = append(opts, cel.Variable(v.ItemName, p.typeOf("capflow.item", v.Item)), cel.Variable("index", types.IntType))
	}
	return cel.NewEnv(opts...)
}
