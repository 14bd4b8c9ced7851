// Package expr holds plan conditions (`when`): CEL expressions
// (github.com/google/cel-go) over the plan's inputs, earlier steps' results
// and, in a for_each step, the item and its index.
//
// Conditions are checked twice, with the same parser: before the run, with
// types derived from the plan's input schemas and the chosen tools' output
// schemas (Check: a list compared with an int, or a field the producer does
// not declare, is an error naming the expression); and in the workflow,
// where Eval runs them over plain JSON values with dynamic types. Eval is
// pure: no time, no randomness, no I/O.
package expr

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/parser"
)

// Vars are the types of what a condition may read, as JSON Schemas.
type Vars struct {
	// Inputs maps each plan input to its schema.
	Inputs map[string]map[string]any
	// Steps maps each step the condition may read to the schema of its
	// data (nil: unknown, any field allowed).
	Steps map[string]map[string]any
	// ItemName and Item describe a for_each step's item ("" outside one).
	ItemName string
	Item     map[string]any
}

// Check parses and type-checks a condition; the error says what is wrong
// and where in the expression (CEL's own positions).
func Check(src string, v Vars) error {
	env, err := typedEnv(v)
	if err != nil {
		return err
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return fmt.Errorf("%s", tidy(iss.Err().Error()))
	}
	if !ast.OutputType().IsExactType(types.BoolType) && !ast.OutputType().IsExactType(types.DynType) {
		return fmt.Errorf("the condition is a %s, not a bool", ast.OutputType())
	}
	return constants(env, ast)
}

// constants evaluates what a condition computes from literals alone
// (`1 / 0`, `[1, 2][5]`, `uint(-1)`, a regular expression that does not
// compile): such a failure is certain, so it is found before the run.
// Each largest literal-only part is evaluated on its own (CEL's constant
// folding skips what fails instead of reporting it).
func constants(env *cel.Env, checked *cel.Ast) error {
	root := celast.NavigateAST(checked.NativeRep())
	for _, e := range celast.MatchDescendants(root, func(e celast.NavigableExpr) bool {
		if !literalOnly(e) || (e.Kind() != celast.CallKind && e.Kind() != celast.SelectKind && e.Kind() != celast.MapKind) {
			return false
		}
		parent, ok := e.Parent()
		return (!ok || !literalOnly(parent)) && !absorbed(e)
	}) {
		text, err := parser.Unparse(e, checked.NativeRep().SourceInfo())
		if err != nil {
			continue
		}
		if _, err := Eval("("+text+") == ("+text+")", nil, nil, "", nil, 0); err != nil {
			return fmt.Errorf("always fails: %s: %s", text, err)
		}
	}
	// Planning with optimisation compiles constant regular expressions.
	if _, err := env.Program(checked, cel.EvalOptions(cel.OptOptimize)); err != nil {
		return fmt.Errorf("always fails: %s", tidy(err.Error()))
	}
	return nil
}

// absorbed reports whether e sits where CEL may absorb its error: an
// operand of || or && (the other side can decide), a branch of ?: or a
// macro's body (which may never run). Its failure is not certain there.
func absorbed(e celast.NavigableExpr) bool {
	for p, ok := e.Parent(); ok; p, ok = p.Parent() {
		if p.Kind() == celast.ComprehensionKind {
			return true
		}
		if p.Kind() == celast.CallKind {
			switch p.AsCall().FunctionName() {
			case operators.LogicalOr, operators.LogicalAnd, operators.Conditional, operators.NotStrictlyFalse:
				return true
			}
		}
	}
	return false
}

// literalOnly is an expression that reads nothing: no variable, no
// comprehension.
func literalOnly(e celast.NavigableExpr) bool {
	only := true
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(x celast.Expr) {
		if k := x.Kind(); k == celast.IdentKind || k == celast.ComprehensionKind {
			only = false
		}
	}))
	return only
}

// Syntax parses a condition without types (plan parsing: a malformed
// expression is reported with the plan's own positions).
func Syntax(src string) error {
	env, err := cel.NewEnv()
	if err != nil {
		return err
	}
	if _, iss := env.Parse(src); iss != nil && iss.Err() != nil {
		return fmt.Errorf("%s", tidy(iss.Err().Error()))
	}
	return nil
}

// Eval runs a condition over JSON values: inputs, steps (id -> {"data",
// "success", "status"}), and the item and index when itemName is set.
func Eval(src string, inputs map[string]any, steps map[string]any, itemName string, item any, index int) (bool, error) {
	opts := []cel.EnvOption{
		cel.Variable("inputs", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("steps", cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		cel.CustomTypeAdapter(orderedAdapter{types.DefaultTypeAdapter}),
		ext.Strings(),
	}
	act := map[string]any{"inputs": orEmpty(inputs), "steps": orEmpty(steps)}
	if itemName != "" {
		opts = append(opts, cel.Variable(itemName, cel.DynType), cel.Variable("index", cel.IntType))
		act[itemName], act["index"] = ints(item), int64(index)
	}
	act["inputs"], act["steps"] = ints(act["inputs"]), ints(act["steps"])
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return false, err
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return false, fmt.Errorf("%s", tidy(iss.Err().Error()))
	}
	prg, err := env.Program(ast, cel.CostLimit(maxCost))
	if err != nil {
		return false, err
	}
	out, _, err := prg.Eval(act)
	if err != nil {
		return false, fmt.Errorf("%s", tidy(err.Error()))
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the condition gave %v, not a bool", out.Value())
	}
	return b, nil
}

// maxCost bounds one evaluation (CEL's cost units): a condition over a
// huge list cannot stall a workflow task.
const maxCost = 1_000_000

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// ints turns integral JSON numbers into int64, so `count > 3` and
// `count + 1` behave as written (JSON decodes every number as float64).
func ints(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = ints(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = ints(x)
		}
		return out
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t)
		}
	case int:
		return int64(t)
	}
	return v
}

// tidy keeps the first line of each of CEL's errors: where, and what.
func tidy(s string) string {
	// Each error's first line: its position and message. The lines after
	// it draw the source and a caret, which flattened into one line read
	// as noise (" | steps.x > 3 | ....^"); capflow shows the plan's own
	// line with its caret.
	var msgs []string
	for _, e := range strings.Split(s, "ERROR: <input>:") {
		if line, _, _ := strings.Cut(strings.TrimSpace(e), "\n"); line != "" {
			msgs = append(msgs, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(msgs, "; ")
}

// StepsRead lists the steps a condition reads (`steps.ID` or
// `steps["ID"]`), sorted, from its syntax tree: a step named inside a
// string literal is not read.
func StepsRead(src string) ([]string, error) {
	env, err := cel.NewEnv()
	if err != nil {
		return nil, err
	}
	parsed, iss := env.Parse(src)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	seen := map[string]bool{}
	isSteps := func(e celast.Expr) bool { return e.Kind() == celast.IdentKind && e.AsIdent() == "steps" }
	celast.PreOrderVisit(parsed.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.SelectKind:
			if sel := e.AsSelect(); isSteps(sel.Operand()) {
				seen[sel.FieldName()] = true
			}
		case celast.CallKind:
			call := e.AsCall()
			if call.FunctionName() == "_[_]" && len(call.Args()) == 2 && isSteps(call.Args()[0]) && call.Args()[1].Kind() == celast.LiteralKind {
				if s, ok := call.Args()[1].AsLiteral().Value().(string); ok {
					seen[s] = true
				}
			}
		}
	}))
	return slices.Sorted(maps.Keys(seen)), nil
}
