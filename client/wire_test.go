package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Every exported name of wire is client's too (client/wire.go), so a Go
// service needs client alone; none is defined twice.
func TestClientReexportsWire(t *testing.T) {
	wire := exported(t, "../wire/*.go")
	here := exported(t, "wire.go")
	for name := range wire {
		if !here[name] {
			t.Errorf("client does not re-export wire.%s: add it to client/wire.go", name)
		}
	}
	for name := range exported(t, "*.go") {
		if wire[name] && !here[name] {
			t.Errorf("client defines %s, which wire defines: one definition per wire type", name)
		}
	}
}

// exported are the top-level exported names (not methods) of the non-test
// files matching pattern.
func exported(t *testing.T, pattern string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: %v", pattern, err)
	}
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || (pattern == "*.go" && f == "wire.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					out[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return out
}
