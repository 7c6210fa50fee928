package db

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every test binary that can start a throwaway cluster stops it: a
// package whose files (its tests' or its own) import internal/pgtest, or
// a package that does, has a TestMain that calls pgtest.Main (as this
// package's, main_test.go). Without one the
// cluster outlives the binary (a postmaster and a directory under the
// temporary directory per run). The check reads the imports of the
// module's files, not the build.
func TestEveryPackageThatMayStartAClusterStopsIt(t *testing.T) {
	t.Parallel()
	root, module := moduleRoot(t)
	self := module + "/internal/pgtest"
	type pkg struct {
		imports  map[string]bool // of every file, tests included
		own      map[string]bool // of the package's non-test files
		stops    bool            // a _test.go file calls Main
		testFile bool
	}
	pkgs := map[string]*pkg{} // by import path
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(name, "_test.go")
		mode := parser.ImportsOnly
		if test {
			mode = parser.SkipObjectResolution
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, src, mode)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		ip := path.Join(module, filepath.ToSlash(rel))
		k := pkgs[ip]
		if k == nil {
			k = &pkg{imports: map[string]bool{}, own: map[string]bool{}}
			pkgs[ip] = k
		}
		for _, im := range f.Imports {
			v, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return err
			}
			k.imports[v] = true
			if !test {
				k.own[v] = true
			}
		}
		if test {
			k.testFile = true
			k.stops = k.stops || mainCallsPgtestMain(f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// starters: the packages whose code may start a cluster, this one and
	// every package that imports one of them in its non-test files.
	starters := map[string]bool{self: true}
	for grew := true; grew; {
		grew = false
		for ip, k := range pkgs {
			if starters[ip] {
				continue
			}
			for im := range k.own {
				if starters[im] {
					starters[ip], grew = true, true
					break
				}
			}
		}
	}
	checked := 0
	for ip, k := range pkgs {
		if ip == self || !k.testFile {
			continue
		}
		for im := range k.imports {
			if starters[im] || starters[ip] {
				checked++
				if !k.stops {
					t.Errorf("%s: its tests may start a PostgreSQL cluster (%s) but no TestMain calls pgtest.Main to stop it", ip, im)
				}
				break
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package of the module uses pgtest: the walk found none")
	}
}

// mainCallsPgtestMain reports whether f has a TestMain that calls
// pgtest.Main.
func mainCallsPgtestMain(f *ast.File) bool {
	found := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || fd.Name.Name != "TestMain" || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Main" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "pgtest" {
					found = true
				}
			}
			return !found
		})
	}
	return found
}

// moduleRoot is the directory of the module's go.mod and the module's
// path.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
					return dir, strings.TrimSpace(m)
				}
			}
			t.Fatal("go.mod names no module")
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
