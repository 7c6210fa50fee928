package storetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// Every func testX(*testing.T, Harness) of the package is listed once, in
// tests or processTests, as X: a test written and not listed would never
// run.
func TestEveryTestIsListed(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "test") || len(fd.Type.Params.List) != 2 {
				continue
			}
			if typ, ok := fd.Type.Params.List[1].Type.(*ast.Ident); ok && typ.Name == "Harness" {
				written[fd.Name.Name] = true
			}
		}
	}
	if len(written) == 0 {
		t.Fatal("no test functions found")
	}
	listed := map[string]bool{}
	for _, tc := range append(append([]test{}, tests...), processTests...) {
		full := runtime.FuncForPC(reflect.ValueOf(tc.fn).Pointer()).Name()
		fn := full[strings.LastIndex(full, ".")+1:]
		if listed[fn] {
			t.Errorf("%s is listed twice", fn)
		}
		listed[fn] = true
		if want := "test" + tc.name; fn != want {
			t.Errorf("the subtest %q runs %s: want %s", tc.name, fn, want)
		}
		if !written[fn] {
			t.Errorf("%s is listed but not a func %s(*testing.T, Harness)", fn, fn)
		}
	}
	for fn := range written {
		if !listed[fn] {
			t.Errorf("%s is not listed in tests or processTests: it never runs", fn)
		}
	}
}
