package step

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Nothing but the executor runs a tool for a step: no other code of the
// module builds a toolrun.Request, except `capflow tools run` (one tool,
// outside any run: no step, no run folder) and toolrun's own tests.
func TestOnlyTheExecutorRunsTools(t *testing.T) {
	allowed := map[string]bool{"internal/step": true, "internal/toolrun": true, "internal/cli/tools.go": true}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin") && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || allowed[filepath.Dir(rel)] || allowed[rel] {
			return nil
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.CompositeLit); ok {
				if sel, ok := lit.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Request" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "toolrun" {
						t.Errorf("%s builds a toolrun.Request: tools run through the step executor (internal/step)", fset.Position(lit.Pos()))
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
