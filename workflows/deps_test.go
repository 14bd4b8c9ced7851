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
	out, err := exec.Command("go", "list", "-deps", ".", "./limit").Output()
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

// Functions of the workflow and activity code read at once: none of the
// workflows' is over 60 lines (issue 55), none of the activities' over 80.
func TestFunctionsFitOnAScreen(t *testing.T) {
	for dir, most := range map[string]int{".": 60, "limit": 60, "agentrun": 60, "../activities": 80, "../internal/step": 80} {
		eachSourceFile(t, dir, func(fset *token.FileSet, file *ast.File) {
			for _, d := range file.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > most {
					t.Errorf("%s: %s is %d lines, more than %d: split it", fset.Position(fd.Pos()), fd.Name.Name, n, most)
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
