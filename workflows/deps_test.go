package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Workflow code runs no tool, process, child process or file operation
// (docs/architecture.md): it does not even link the packages that do.
func TestWorkflowCodeLinksNoToolRunner(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"jq", "sandbox", "builtin", "toolrun", "runtimekit", "mcpclient", "artifacts", "cache", "beneath", "procfs", "preflight", "step"} {
			if pkg == "github.com/capflow/capflow/internal/"+banned {
				t.Errorf("the workflows package depends on %s", pkg)
			}
		}
	}
}

// Functions of the workflow and activity code read at once: none is over
// 80 lines.
func TestFunctionsFitOnAScreen(t *testing.T) {
	for _, dir := range []string{".", "../activities", "../internal/step"} {
		eachSourceFile(t, dir, func(fset *token.FileSet, file *ast.File) {
			for _, d := range file.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > 80 {
					t.Errorf("%s: %s is %d lines", fset.Position(fd.Pos()), fd.Name.Name, n)
				}
			}
		})
	}
}

// eachSourceFile parses every non-test Go file of dir.
func eachSourceFile(t *testing.T, dir string, visit func(*token.FileSet, *ast.File)) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		visit(fset, file)
	}
}
