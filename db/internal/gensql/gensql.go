// Package gensql finds the SQL statements package db runs: every call of
// its statement wrappers (sqlcore.Tx's Exec, Query, QueryRow, QueryIDs,
// Insert and ExecLater), with the text each passes when that text is a
// constant (a literal, a named constant, a concatenation of constants,
// or a package variable set by PGQuery or PGInsert), and the calls whose
// text is built at run time.
//
// It reads db's source with go/parser and type-checks it with go/types,
// against the export data `go list -export` gives for db's imports, so
// that constants are folded exactly as the compiler folds them. It knows
// no dialect: the PostgreSQL texts are made by db's own translator, in
// db's test TestPGStatementsFile (pg_statements_test.go), which writes
// db/testdata/pg_statements.sql from what Collect finds.
package gensql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Wrappers are sqlcore.Tx's statement wrappers, each with the index of its
// query argument.
var Wrappers = map[string]int{
	"Exec":      1,
	"Query":     1,
	"QueryRow":  1,
	"QueryIDs":  1,
	"ExecLater": 1,
	"Insert":    2, // Insert(ctx, col, query, args...)
}

// Site is one call of a wrapper.
type Site struct {
	Func string // the function that calls it: Tx.Ack, FoldRows
	// Wrapper is exec, query, ..., or "" for a package variable set by
	// PGQuery or PGInsert that the function names elsewhere than as a
	// wrapper's query (it picks it at run time among others).
	Wrapper string
	// Const: the query is a constant; SQL is its text, and for insert
	// Col the column it returns on PostgreSQL (RETURNING Col).
	Const bool
	SQL   string
	Col   string
	// Var: the package variable the text was read from (PGQuery,
	// PGInsert), or "".
	Var string
	// Expr is the query argument as written, when it is not a constant.
	Expr string
	// Only is "sqlite" when the call runs on SQLite only, "postgres" on
	// PostgreSQL only, as its function's receiver says (storeOf), or ""
	// for both.
	Only string
}

// Collect returns the wrapper calls in the non-test Go files of the
// package in dir (db/internal/sqlcore, or a store beside it), in source order.
func Collect(dir string) ([]Site, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	pkgs, err := goList(dir)
	if err != nil {
		return nil, err
	}
	var self *listed
	exports := map[string]string{}
	for _, p := range pkgs {
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			self = p
		}
	}
	if self == nil {
		return nil, fmt.Errorf("go list: no package in %s", dir)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range append(self.GoFiles, self.CgoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if p := self.ImportMap[path]; p != "" {
			path = p
		}
		e := exports[path]
		if e == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(e)
	})
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	// A cgo file's C.x are left untyped (FakeImportC): no statement is
	// written in C.
	// written in C), and the errors that follow from them in those
	// files only are set aside.
	cgo := map[string]bool{}
	for _, name := range self.CgoFiles {
		cgo[filepath.Join(dir, name)] = true
	}
	var typeErr error
	conf := types.Config{Importer: imp, FakeImportC: true, Error: func(err error) {
		if te, ok := err.(types.Error); ok && cgo[te.Fset.Position(te.Pos).Filename] {
			return
		}
		if typeErr == nil {
			typeErr = err
		}
	}}
	pkg, _ := conf.Check(self.ImportPath, fset, files, info)
	if typeErr != nil {
		return nil, typeErr
	}

	// The package variables set by PGQuery(sqlite, pg) or
	// PGInsert(col, sqlite, pg): their SQLite text.
	type pair struct{ sql, col string }
	given := map[types.Object]pair{}
	for _, init := range info.InitOrder {
		call, ok := init.Rhs.(*ast.CallExpr)
		if !ok || len(init.Lhs) != 1 {
			continue
		}
		var fn *ast.Ident
		switch f := call.Fun.(type) {
		case *ast.Ident:
			fn = f
		case *ast.SelectorExpr:
			fn = f.Sel
		}
		if fn == nil || info.Uses[fn] == nil || !isCore(info.Uses[fn].Pkg()) {
			continue
		}
		i := map[string]int{"PGQuery": 0, "PGInsert": 1}
		n, ok := i[fn.Name]
		if !ok {
			continue
		}
		if s, ok := constString(info, call.Args[n]); ok {
			col := ""
			if n == 1 {
				col, _ = constString(info, call.Args[0])
			}
			given[init.Lhs[0]] = pair{s, col}
		}
	}

	var sites []Site
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := funcName(fd)
			only := storeOf(fd)
			direct := map[*ast.Ident]bool{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					// A PGQuery variable the function picks among
					// others, passed at run time.
					if g, ok := given[info.Uses[id]]; ok && !direct[id] {
						sites = append(sites, Site{Func: name, Const: true, SQL: g.sql, Col: g.col, Var: id.Name, Only: only})
					}
					return true
				}
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				s := info.Selections[sel]
				if s == nil || s.Kind() != types.MethodVal || !isStoreTx(s.Recv(), pkg) {
					return true
				}
				idx, ok := Wrappers[sel.Sel.Name]
				if !ok || len(call.Args) <= idx {
					return true
				}
				site := Site{Func: name, Wrapper: sel.Sel.Name, Only: only}
				arg := call.Args[idx]
				if q, ok := constString(info, arg); ok {
					site.Const, site.SQL = true, q
				} else if id, ok := ast.Unparen(arg).(*ast.Ident); ok {
					if g, ok := given[info.Uses[id]]; ok {
						site.Const, site.SQL, site.Var = true, g.sql, id.Name
						direct[id] = true
					}
				}
				if site.Const && site.Wrapper == "Insert" {
					col, ok := constString(info, call.Args[1])
					if !ok {
						site.Const = false // RETURNING col is built at run time
					}
					site.Col = col
				}
				if !site.Const {
					site.SQL, site.Var = "", ""
					site.Expr = types.ExprString(arg)
					if id, ok := ast.Unparen(arg).(*ast.Ident); ok {
						if v, ok := info.Uses[id].(*types.Var); ok && v.Parent() == pkg.Scope() {
							site.Expr += " (package variable)"
						}
					}
				}
				sites = append(sites, site)
				return true
			})
		}
	}
	return sites, nil
}

// storeOf is the store a method of one store's own type runs on: a
// method of sqliteDialect or another type named sqlite… runs on SQLite
// only, of pgDialect, pgRowLocks or another pg… on PostgreSQL only.
func storeOf(fd *ast.FuncDecl) string {
	recv, _, ok := strings.Cut(funcName(fd), ".")
	switch {
	case !ok:
		return ""
	case strings.HasPrefix(recv, "sqlite"):
		return "sqlite"
	case strings.HasPrefix(recv, "pg"):
		return "postgres"
	}
	return ""
}

func constString(info *types.Info, e ast.Expr) (string, bool) {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}

func isStoreTx(t types.Type, _ *types.Package) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && isCore(n.Obj().Pkg()) && n.Obj().Name() == "Tx"
}

// isCore reports whether p is db/internal/sqlcore (by its name), whose
// Tx runs the statements.
func isCore(p *types.Package) bool {
	return p != nil && p.Name() == "sqlcore"
}

// funcName is a function's name, a method's with its receiver's type:
// Tx.Ack, not a line number, so that it moves only when the code is
// renamed.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

type listed struct {
	Dir        string
	ImportPath string
	Export     string
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	DepOnly    bool
	Error      *struct{ Err string }
}

// goList lists the package in dir and its dependencies, with the export
// data of each (building what the build cache lacks).
func goList(dir string) ([]*listed, error) {
	cmd := exec.Command("go", "list", "-e", "-export", "-deps", "-json=Dir,ImportPath,Export,GoFiles,CgoFiles,ImportMap,DepOnly,Error", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []*listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, &p)
	}
	return pkgs, nil
}

// wrapper reports whether f is one of the wrappers, whose calls of each
// other pass their caller's text along.
func wrapper(f string) bool {
	_, ok := Wrappers[strings.TrimPrefix(f, "Tx.")]
	return ok && strings.HasPrefix(f, "Tx.")
}

// Dynamic is the calls whose text is built at run time, one line each
// ("Tx.ListDeadLetters: Query(q)"), sorted, with duplicates kept
// once; the wrappers' calls of each other are left out.
func Dynamic(sites []Site) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range sites {
		if s.Const || s.Wrapper == "" || wrapper(s.Func) {
			continue
		}
		l := fmt.Sprintf("%s: %s(%s)", s.Func, s.Wrapper, strings.Join(strings.Fields(s.Expr), " "))
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}
