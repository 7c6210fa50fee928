package db

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// The stores' ExecUncatalogued and QueryRowUncatalogued run a text no
// catalog holds: tests' own, never Lazarus's. No Go file of the module
// but a test's (or the conformance suite's, broker/storetest, a library
// of tests) calls them.
func TestUncataloguedIsForTestsOnly(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(path, "_test.go") || strings.HasPrefix(filepath.ToSlash(rel), "broker/storetest/")
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "ExecUncatalogued" || sel.Sel.Name == "QueryRowUncatalogued" || sel.Sel.Name == "ExecSearchUncatalogued") {
				found++
				if !test {
					t.Errorf("%s calls %s: a statement of Lazarus's belongs in the catalog", rel, sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no call of ExecUncatalogued or QueryRowUncatalogued found: the test reads nothing")
	}
}
