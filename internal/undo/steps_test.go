package undo

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStepsReadNoNamedResult finds, in every file of the module that
// uses this package, an undo step (a function literal given to Add)
// that reads a named result of the function adding it: the return
// statement that reports the failure zeroes that result before the step
// runs, so the step undoes something else (the bug that freed another
// sandbox's uid slot 0).
func TestStepsReadNoNamedResult(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	const self = `"github.com/execbox/execbox/internal/undo"`
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		if !imports(f, self) {
			return nil
		}
		files++
		for _, bad := range stepsReadingResults(f) {
			t.Errorf("%s: an undo step reads %s, a named result of %s: give the step a variable of its own", fset.Position(bad.pos), bad.name, bad.fn)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 {
		t.Fatalf("found %d files using package undo: the walk is wrong", files)
	}
}

func imports(f *ast.File, path string) bool {
	for _, im := range f.Imports {
		if im.Path.Value == path {
			return true
		}
	}
	return false
}

type finding struct {
	pos      token.Pos
	name, fn string
}

// stepsReadingResults returns the identifiers, in function literals
// passed to a method Add, that resolve to a named result of the
// enclosing function declaration.
func stepsReadingResults(f *ast.File) []finding {
	var out []finding
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil || fd.Type.Results == nil {
			continue
		}
		results := map[*ast.Object]bool{}
		for _, fl := range fd.Type.Results.List {
			for _, n := range fl.Names {
				if n.Name != "_" && n.Obj != nil {
					results[n.Obj] = true
				}
			}
		}
		if len(results) == 0 {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Add" || len(call.Args) != 1 {
				return true
			}
			lit, ok := call.Args[0].(*ast.FuncLit)
			if !ok {
				return true
			}
			ast.Inspect(lit.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && id.Obj != nil && results[id.Obj] {
					out = append(out, finding{id.Pos(), id.Name, fd.Name.Name})
				}
				return true
			})
			return true
		})
	}
	return out
}
