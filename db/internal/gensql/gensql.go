// Package gensql finds the SQL statements the stores run (db/sqlite,
// db/postgres and db/internal/sqlcore): every call of
// its statement wrappers (sqlcore.Tx's Exec, Query, QueryRow, QueryIDs,
// Insert and ExecLater), with the text each passes when that text is a
// constant (a literal, a named constant, a concatenation of constants,
// or a package variable set by PGQuery or PGInsert), and the calls whose
// text is built at run time.
//
// It reads the packages' source with go/parser and type-checks it with
// go/types, against the export data `go list -export` gives for their
// imports, so that constants are folded exactly as the compiler folds
// them. It knows no dialect: the PostgreSQL texts are made by
// db/postgres's own translator, in its test TestPGStatementsFile
// (statements_test.go), which writes
// db/postgres/testdata/statements.sql and db/postgres/catalog.go
// from what Collect finds.
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
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	// A composed statement's (sqlcore.Stmt), its fragments with it:
	// QueryStmt(ctx, &s).
	"QueryStmt":    1,
	"QueryRowStmt": 1,
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
	// Composed: the query is a composed statement (a sqlcore.Stmt given
	// to QueryStmt or QueryRowStmt, or s.SQL() of one), made of fragments
	// alone; Expr is as written.
	Composed bool
	// Frag is the name of a fragment (a package constant of type
	// sqlcore.Frag, or a variable set by PGFrag), whose text is SQL; such
	// a site has no Func and no Wrapper.
	Frag string
}

// Collect returns the wrapper calls in the non-test Go files of the
// packages in dirs (db/internal/sqlcore, and the stores beside it), in
// the order of dirs and then of the source. A call of an interface's
// method (t.locks.ForUpdate()) stands for the results of that method of
// each type of these packages that has the interface's methods.
func Collect(dirs ...string) ([]Site, error) {
	var ps []*pkgSites
	var folders []*folder
	for _, dir := range dirs {
		p, err := load(dir)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
		folders = append(folders, p.fo)
	}
	var sites []Site
	for _, p := range ps {
		p.fo.peers = folders
		sites = append(sites, p.sites()...)
	}
	for _, p := range ps {
		if err := p.fragConversions(); err != nil {
			return nil, err
		}
		sites = append(sites, p.frags...)
	}
	return sites, nil
}

// pkgSites is one package, loaded, with what its sites are found by.
type pkgSites struct {
	fset    *token.FileSet
	frags   []Site // the package's fragments, by name
	files   []*ast.File
	info    *types.Info
	pkg     *types.Package
	fo      *folder
	given   map[types.Object]pair
	passers map[types.Object][]int
}

// load reads, type-checks and readies the package in dir.
func load(dir string) (*pkgSites, error) {
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

	// The package's functions, for folding a helper's call (fold).
	funcs := map[types.Object]*ast.FuncDecl{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				funcs[info.Defs[fd.Name]] = fd
			}
		}
	}
	fo := &folder{info: info, pkg: pkg, funcs: funcs, vars: map[types.Object]string{}, lits: map[types.Object]*ast.CompositeLit{}, busy: map[types.Object]bool{}, recs: map[types.Object]map[string]string{}, once: map[types.Object]ast.Expr{}}
	assigned := assignedVars(info, files)

	// The package variables set by PGQuery(sqlite, pg) or
	// PGInsert(col, sqlite, pg): their SQLite text; and those set once
	// to a text that folds and never assigned again, taken as constants.
	given := map[types.Object]pair{}
	var frags []Site
	for _, init := range info.InitOrder {
		if len(init.Lhs) != 1 || assigned[init.Lhs[0]] {
			continue
		}
		call, ok := init.Rhs.(*ast.CallExpr)
		if ok {
			if fn := calleeIdent(call); fn != nil && info.Uses[fn] != nil && isCore(info.Uses[fn].Pkg()) {
				if fn.Name == "PGFrag" {
					if s, ok := fo.fold(call.Args[0], nil, 0); ok {
						frags = append(frags, Site{Const: true, SQL: s, Frag: init.Lhs[0].Name()})
					}
					continue
				}
				i := map[string]int{"PGQuery": 0, "PGInsert": 1}
				if n, ok := i[fn.Name]; ok {
					if s, ok := fo.fold(call.Args[n], nil, 0); ok {
						col := ""
						if n == 1 {
							col, _ = fo.fold(call.Args[0], nil, 0)
						}
						given[init.Lhs[0]] = pair{s, col}
					}
					continue
				}
			}
		}
		if s, ok := fo.fold(init.Rhs, nil, 0); ok {
			fo.vars[init.Lhs[0]] = s
		} else if lit, ok := init.Rhs.(*ast.CompositeLit); ok {
			fo.lits[init.Lhs[0]] = lit
		}
	}

	// The functions that pass a parameter on as a wrapper's query
	// (scanKeys(ctx, t, query, args...), a closure's stmt) are wrappers
	// too: their callers' texts are the sites. Found again until no more
	// are (a helper of a helper).
	// A function may pass on several (fill(insert, read, ...)).
	passers := map[types.Object][]int{}
	for {
		n := 0
		for _, is := range passers {
			n += len(is)
		}
		added := 0
		walkCalls(files, func(stack []ast.Node, call *ast.CallExpr) {
			_, idxs, ok := callee(info, pkg, passers, call)
			if !ok {
				return
			}
			for _, idx := range idxs {
				if owner, i := paramOf(info, stack, call.Args[idx]); owner != nil && !slices.Contains(passers[owner], i) {
					passers[owner] = append(passers[owner], i)
					added++
				}
			}
		})
		if added == 0 {
			break
		}
	}
	fo.given = given
	// The fragments: the package's constants of type Frag, and the
	// variables PGFrag set.
	for _, name := range pkg.Scope().Names() {
		if c, ok := pkg.Scope().Lookup(name).(*types.Const); ok && isFrag(c.Type()) {
			frags = append(frags, Site{Const: true, SQL: constant.StringVal(c.Val()), Frag: name})
		}
	}
	for i := range frags {
		// A fragment of package sqlite or postgres is that store's
		// only (storeOf).
		frags[i].Only = storeOf(pkg, nil)
	}
	sort.Slice(frags, func(i, j int) bool { return frags[i].Frag < frags[j].Frag })
	return &pkgSites{fset: fset, frags: frags, files: files, info: info, pkg: pkg, fo: fo, given: given, passers: passers}, nil
}

// fragConversions refuses a conversion to Frag of a text that is not a
// constant: a fragment is catalogued only as a constant.
func (p *pkgSites) fragConversions() error {
	var err error
	for _, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 || err != nil {
				return err == nil
			}
			if tv, ok := p.info.Types[call.Fun]; ok && tv.IsType() && isFrag(tv.Type) {
				if _, ok := constString(p.info, call.Args[0]); !ok {
					err = fmt.Errorf("%s: a Frag made of a text that is not a constant: %s", p.fset.Position(call.Pos()), types.ExprString(call))
				}
			}
			return err == nil
		})
	}
	return err
}

// isFrag reports whether t is sqlcore.Frag.
func isFrag(t types.Type) bool {
	n, ok := t.(*types.Named)
	return ok && isCore(n.Obj().Pkg()) && n.Obj().Name() == "Frag"
}

// isComposed reports whether e is a sqlcore.Stmt (s, &s: QueryStmt's) or
// s.SQL() of one.
func isComposed(info *types.Info, e ast.Expr) bool {
	if t := info.TypeOf(e); t != nil {
		if ptr, ok := t.(*types.Pointer); ok {
			t = ptr.Elem()
		}
		if n, ok := t.(*types.Named); ok && isCore(n.Obj().Pkg()) && n.Obj().Name() == "Stmt" {
			return true
		}
	}
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "SQL" {
		return false
	}
	s := info.Selections[sel]
	if s == nil || s.Kind() != types.MethodVal {
		return false
	}
	t := s.Recv()
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && isCore(n.Obj().Pkg()) && n.Obj().Name() == "Stmt"
}

// sites are the package's wrapper calls.
func (p *pkgSites) sites() []Site {
	files, info, pkg, given, passers := p.files, p.info, p.pkg, p.given, p.passers
	var sites []Site
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := funcName(fd)
			only := storeOf(pkg, fd)
			direct := map[*ast.Ident]bool{}
			walk(fd, []ast.Node{fd}, func(stack []ast.Node, n ast.Node) {
				if id, ok := n.(*ast.Ident); ok {
					// A PGQuery variable the function picks among
					// others, passed at run time.
					if g, ok := given[info.Uses[id]]; ok && !direct[id] {
						sites = append(sites, Site{Func: name, Const: true, SQL: g.sql, Col: g.col, Var: id.Name, Only: only})
					}
					return
				}
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return
				}
				wname, idxs, ok := callee(info, pkg, passers, call)
				if !ok {
					return
				}
				for _, idx := range idxs {
					sites = p.site(sites, fd, name, only, wname, stack, call, call.Args[idx], direct)
				}
			})
		}
	}
	return sites
}

// site appends to sites those of the wrapper wname's call (in fd,
// named name) passing arg as its query.
func (p *pkgSites) site(sites []Site, fd *ast.FuncDecl, name, only, wname string, stack []ast.Node, call *ast.CallExpr, arg ast.Expr, direct map[*ast.Ident]bool) []Site {
	info, pkg, fo, given := p.info, p.pkg, p.fo, p.given
	if owner, _ := paramOf(info, stack, arg); owner != nil {
		return sites // a passer's: its callers' texts are the sites
	}
	site := Site{Func: name, Wrapper: wname, Only: only}
	col, colOK := "", true
	if site.Wrapper == "Insert" {
		// RETURNING col is built at run time when col is not
		// a constant.
		col, colOK = fo.fold(call.Args[1], nil, 0)
	}
	if id, ok := ast.Unparen(arg).(*ast.Ident); ok && colOK {
		if g, ok := given[info.Uses[id]]; ok {
			site.Const, site.SQL, site.Var, site.Col = true, g.sql, id.Name, col
			direct[id] = true
			sites = append(sites, site)
			return sites
		}
	}
	if qs, ok := fo.values(arg, fd.Body, given); ok && colOK {
		// A constant, or a local variable only ever set to
		// constants: a site for each.
		for _, q := range qs {
			if q.sql == "" {
				continue // none to run
			}
			c := site
			c.Const, c.SQL, c.Var, c.Col = true, q.sql, q.v, col
			if c.Only == "" {
				c.Only = q.only
			}
			sites = append(sites, c)
		}
		return sites
	}
	site.Col = col
	site.Expr = types.ExprString(arg)
	site.Composed = isComposed(info, arg)
	if id, ok := ast.Unparen(arg).(*ast.Ident); ok {
		if v, ok := info.Uses[id].(*types.Var); ok && v.Parent() == pkg.Scope() {
			site.Expr += " (package variable)"
		}
	}
	sites = append(sites, site)
	return sites
}

// walk calls fn with each node under n (a function, the last of
// stack) and the functions (FuncDecl, FuncLit) it is inside, innermost
// last.
func walk(n ast.Node, stack []ast.Node, fn func(stack []ast.Node, n ast.Node)) {
	ast.Inspect(n, func(c ast.Node) bool {
		if c == nil || c == n {
			return c != nil
		}
		switch c.(type) {
		case *ast.FuncDecl, *ast.FuncLit:
			walk(c, append(stack, c), fn)
			return false
		}
		fn(stack, c)
		return true
	})
}

// walkCalls calls fn with every call in the files' functions.
func walkCalls(files []*ast.File, fn func(stack []ast.Node, call *ast.CallExpr)) {
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			walk(fd, []ast.Node{fd}, func(stack []ast.Node, n ast.Node) {
				if call, ok := n.(*ast.CallExpr); ok {
					fn(stack, call)
				}
			})
		}
	}
}

// callee says whether call is of a wrapper (a sqlcore.Tx method of
// Wrappers, or a passer), its name and the indexes of its query
// arguments.
func callee(info *types.Info, pkg *types.Package, passers map[types.Object][]int, call *ast.CallExpr) (string, []int, bool) {
	var id *ast.Ident
	switch fn := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fn
	case *ast.SelectorExpr:
		if s := info.Selections[fn]; s != nil && s.Kind() == types.MethodVal && isStoreTx(s.Recv()) {
			if idx, ok := Wrappers[fn.Sel.Name]; ok && len(call.Args) > idx {
				return fn.Sel.Name, []int{idx}, true
			}
		}
		id = fn.Sel
	default:
		return "", nil, false
	}
	idxs, ok := passers[info.Uses[id]]
	if !ok || len(call.Args) <= slices.Max(idxs) {
		return "", nil, false
	}
	return id.Name, idxs, true
}

// paramOf reports the function of stack (a FuncDecl's object, or the
// variable a FuncLit is assigned to) whose parameter e is, and the
// parameter's index; or nil.
func paramOf(info *types.Info, stack []ast.Node, e ast.Expr) (types.Object, int) {
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return nil, 0
	}
	obj := info.Uses[id]
	for k := len(stack) - 1; k >= 0; k-- {
		var params *ast.FieldList
		switch f := stack[k].(type) {
		case *ast.FuncDecl:
			params = f.Type.Params
		case *ast.FuncLit:
			params = f.Type.Params
		}
		i := 0
		for _, field := range params.List {
			for _, n := range field.Names {
				if info.Defs[n] == obj {
					if fd, ok := stack[k].(*ast.FuncDecl); ok {
						return info.Defs[fd.Name], i
					}
					if owner := litOwner(info, stack[:k+1]); owner != nil {
						return owner, i
					}
					return nil, 0
				}
				i++
			}
		}
	}
	return nil, 0
}

// litOwner is the variable the innermost FuncLit of stack is assigned
// to (probe := func(...) ...), found in the function around it.
func litOwner(info *types.Info, stack []ast.Node) types.Object {
	if len(stack) < 2 {
		return nil
	}
	lit := stack[len(stack)-1]
	var owner types.Object
	ast.Inspect(stack[len(stack)-2], func(n ast.Node) bool {
		a, ok := n.(*ast.AssignStmt)
		if ok && len(a.Lhs) == 1 && len(a.Rhs) == 1 && a.Rhs[0] == lit {
			if id, ok := a.Lhs[0].(*ast.Ident); ok {
				owner = info.Defs[id]
				if owner == nil {
					owner = info.Uses[id]
				}
			}
		}
		return owner == nil
	})
	return owner
}

// folder folds a statement's text to a constant, as the compiler does
// and further: through the calls of the package's helpers that return
// one expression of their parameters (messagesOf("p")), when their
// arguments fold.
type folder struct {
	info  *types.Info
	pkg   *types.Package
	funcs map[types.Object]*ast.FuncDecl
	vars  map[types.Object]string // package variables that fold
	// lits: package variables set to a slice or map literal, never
	// assigned again.
	lits map[types.Object]*ast.CompositeLit
	busy map[types.Object]bool // the variables varValues is following
	// recs: the struct values the variables being combined take now.
	recs map[types.Object]map[string]string
	// once: the variables set once, to an expression of others, that
	// values reads through.
	once map[types.Object]ast.Expr
	// given: the package's PGQuery variables.
	given map[types.Object]pair
	// peers: the folders of every package collected (this one too),
	// whose methods an interface's method call stands for.
	peers []*folder
	// called: the text an interface's method call (ifaceCall) stands
	// for in the combination being folded.
	called map[*ast.CallExpr]string
}

// fold is e's constant string value; env holds the parameters of the
// helper being folded.
func (f *folder) fold(e ast.Expr, env map[types.Object]string, depth int) (string, bool) {
	if s, ok := constString(f.info, e); ok {
		return s, true
	}
	switch e := ast.Unparen(e).(type) {
	case *ast.SelectorExpr:
		if x, ok := ast.Unparen(e.X).(*ast.Ident); ok {
			if rec, ok := f.recs[f.info.Uses[x]]; ok {
				s, ok := rec[e.Sel.Name]
				return s, ok
			}
		}
		return "", false
	case *ast.Ident:
		if s, ok := env[f.info.Uses[e]]; ok {
			return s, true
		}
		if rhs, ok := f.once[f.info.Uses[e]]; ok {
			return f.fold(rhs, env, depth)
		}
		s, ok := f.vars[f.info.Uses[e]]
		return s, ok
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := f.fold(e.X, env, depth)
		if !ok {
			return "", false
		}
		y, ok := f.fold(e.Y, env, depth)
		return x + y, ok
	case *ast.CallExpr:
		if s, ok := f.called[e]; ok {
			return s, true
		}
		if sel, ok := ast.Unparen(e.Fun).(*ast.SelectorExpr); ok {
			return f.sprintf(sel, e, env, depth)
		}
		id, ok := ast.Unparen(e.Fun).(*ast.Ident)
		if !ok || depth > 8 {
			return "", false
		}
		fd := f.funcs[f.info.Uses[id]]
		if fd == nil || fd.Recv != nil || len(fd.Body.List) != 1 || e.Ellipsis.IsValid() {
			return "", false
		}
		ret, ok := fd.Body.List[0].(*ast.ReturnStmt)
		if !ok || len(ret.Results) != 1 {
			return "", false
		}
		inner := map[types.Object]string{}
		i := 0
		for _, field := range fd.Type.Params.List {
			for _, n := range field.Names {
				if i >= len(e.Args) {
					return "", false
				}
				v, ok := f.fold(e.Args[i], env, depth)
				if !ok {
					return "", false
				}
				inner[f.info.Defs[n]] = v
				i++
			}
		}
		return f.fold(ret.Results[0], inner, depth+1)
	}
	return "", false
}

// sprintf folds fmt.Sprintf of a format and arguments that fold (a
// string) or are integer constants.
func (f *folder) sprintf(sel *ast.SelectorExpr, e *ast.CallExpr, env map[types.Object]string, depth int) (string, bool) {
	fn, ok := f.info.Uses[sel.Sel].(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != "fmt" || fn.Name() != "Sprintf" || len(e.Args) == 0 || e.Ellipsis.IsValid() {
		return "", false
	}
	format, ok := f.fold(e.Args[0], env, depth)
	if !ok {
		return "", false
	}
	var args []any
	for _, a := range e.Args[1:] {
		if tv, ok := f.info.Types[a]; ok && tv.Value != nil && tv.Value.Kind() == constant.Int {
			n, exact := constant.Int64Val(tv.Value)
			if !exact {
				return "", false
			}
			args = append(args, n)
			continue
		}
		s, ok := f.fold(a, env, depth)
		if !ok {
			return "", false
		}
		args = append(args, s)
	}
	return fmt.Sprintf(format, args...), true
}

// assignedVars are the package variables some function assigns to.
func assignedVars(info *types.Info, files []*ast.File) map[types.Object]bool {
	out := map[types.Object]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			if _, ok := d.(*ast.FuncDecl); !ok {
				continue
			}
			ast.Inspect(d, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					for _, l := range n.Lhs {
						if id, ok := ast.Unparen(l).(*ast.Ident); ok {
							if v, ok := info.Uses[id].(*types.Var); ok && v.Parent() == v.Pkg().Scope() {
								out[v] = true
							}
						}
					}
				case *ast.UnaryExpr:
					if id, ok := ast.Unparen(n.X).(*ast.Ident); ok && n.Op == token.AND {
						if v, ok := info.Uses[id].(*types.Var); ok && v.Parent() == v.Pkg().Scope() {
							out[v] = true
						}
					}
				}
				return true
			})
		}
	}
	return out
}

// value is one text a wrapper's query may be: its SQL and the PGQuery
// variable it was read from, if any.
type value struct {
	sql, v string
	// rec: a struct's string fields, for a value that is one
	// (bucketTables' elements), read as rec.field.
	rec map[string]string
	// only: the store the value is set for only (returned by a method
	// of one store's own type, storeOf), or "".
	only string
}

// maxValues bounds the texts one expression may stand for: past it, the
// expression is taken as built at run time.
const maxValues = 64

// values are the texts e may hold in body: its value when it folds;
// else one for each combination of the values of the local variables
// it reads (varValues), each variable taking one value at a time (an
// index read twice is the same index).
func (f *folder) values(e ast.Expr, body *ast.BlockStmt, given map[types.Object]pair) ([]value, bool) {
	if s, ok := f.fold(e, nil, 0); ok {
		return []value{{sql: s}}, true
	}
	if id, ok := ast.Unparen(e).(*ast.Ident); ok {
		if g, ok := given[f.info.Uses[id]]; ok && g.col == "" {
			return []value{{sql: g.sql, v: id.Name}}, true
		}
	}
	// The variables e reads: through those set once to an expression
	// (u := `b.` + bt.unit), which stand for it, to the ones they read,
	// so that each is combined once (u and bt are not taken apart).
	// The calls of an interface's methods it reads, each a value too.
	var vars []types.Object
	var calls []*ast.CallExpr
	seen := map[types.Object]bool{}
	var find func(e ast.Node)
	find = func(e ast.Node) {
		ast.Inspect(e, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && f.ifaceMethod(c) != nil {
				calls = append(calls, c)
				return false
			}
			if id, ok := n.(*ast.Ident); ok {
				if v, ok := f.info.Uses[id].(*types.Var); ok && !v.IsField() && v.Parent() != v.Pkg().Scope() && !seen[v] {
					seen[v] = true
					if rhs := setOnce(f.info, body, v); rhs != nil {
						f.once[v] = rhs
						find(rhs)
					} else {
						vars = append(vars, v)
					}
				}
			}
			return true
		})
	}
	find(e)
	defer func() {
		for v := range seen {
			delete(f.once, v)
		}
	}()
	if len(vars)+len(calls) == 0 {
		return nil, false
	}
	choices := make([][]value, len(vars)+len(calls))
	total := 1
	for i := range choices {
		var vs []value
		ok := false
		if i < len(vars) {
			vs, ok = f.varValues(vars[i], body, e.Pos(), given)
		} else {
			vs, ok = f.implValues(calls[i-len(vars)])
		}
		if !ok {
			return nil, false
		}
		choices[i] = vs
		if total *= len(vs); total > maxValues {
			return nil, false
		}
	}
	var out []value
	env := map[types.Object]string{}
	if f.called == nil {
		f.called = map[*ast.CallExpr]string{}
	}
	defer func() {
		for _, c := range calls {
			delete(f.called, c)
		}
	}()
	var pick func(i int, from, on string) bool
	pick = func(i int, from, on string) bool {
		if i == len(choices) {
			s, ok := f.fold(e, env, 0)
			if ok {
				out = append(out, value{sql: s, v: from, only: on})
			}
			return ok
		}
		for _, c := range choices[i] {
			if i >= len(vars) {
				f.called[calls[i-len(vars)]] = c.sql
			} else if env[vars[i]] = c.sql; c.rec != nil {
				f.recs[vars[i]] = c.rec
			} else {
				delete(f.recs, vars[i])
			}
			v, o := from, on
			if c.v != "" {
				v = c.v
			}
			if c.only != "" {
				if o != "" && o != c.only {
					continue // the two stores' ways never meet
				}
				o = c.only
			}
			if !pick(i+1, v, o) {
				return false
			}
		}
		return true
	}
	ok := pick(0, "", "")
	for _, v := range vars {
		delete(f.recs, v)
	}
	if !ok {
		return nil, false
	}
	return out, true
}

// varValues are the values the local variable v of body may hold at
// pos, following body's statements in order (flow): set by = or := to
// something values knows (a constant, a PGQuery variable, another such
// variable), by v, ok := m[k] or v := s[i] of a package map or slice
// literal, by a, b := f(...) from the returns of a package function, as
// a range's value over a slice literal, grown by +=; an if or a switch
// gives the values of each of its ways, a way that returns none.
func (f *folder) varValues(v types.Object, body *ast.BlockStmt, pos token.Pos, given map[types.Object]pair) ([]value, bool) {
	// A variable set from another, or from a function's results, is
	// followed a few steps at most (and never around a cycle).
	if f.busy[v] || len(f.busy) > 6 {
		return nil, false
	}
	f.busy[v] = true
	defer delete(f.busy, v)
	fl := &flow{f: f, v: v, body: body, pos: pos, given: given, ok: true}
	out, _ := fl.list(body.List, nil)
	out, _ = union(nil, false, out, false) // each once
	if !fl.ok || len(out) == 0 || len(out) > maxValues {
		return nil, false
	}
	return out, true
}

// flow follows the values of one variable through a function's
// statements, up to a position.
type flow struct {
	f     *folder
	v     types.Object
	body  *ast.BlockStmt
	pos   token.Pos
	given map[types.Object]pair
	ok    bool
}

// list runs stmts on the values in; ends says the way returned (or
// reached pos, which ends the walk too).
func (fl *flow) list(stmts []ast.Stmt, in []value) (out []value, ends bool) {
	for _, st := range stmts {
		if !fl.ok {
			return nil, true
		}
		if st.Pos() <= fl.pos && fl.pos < st.End() {
			return fl.into(st, in), true
		}
		var end bool
		in, end = fl.stmt(st, in)
		if end {
			return nil, true
		}
	}
	return in, false
}

// into runs the part of st before pos, which st holds.
func (fl *flow) into(st ast.Stmt, in []value) []value {
	in2 := func(b ast.Node) bool { return b != nil && b.Pos() <= fl.pos && fl.pos < b.End() }
	switch st := st.(type) {
	case *ast.BlockStmt:
		out, _ := fl.list(st.List, in)
		return out
	case *ast.IfStmt:
		if st.Init != nil {
			in, _ = fl.stmt(st.Init, in)
		}
		if in2(st.Body) {
			out, _ := fl.list(st.Body.List, in)
			return out
		}
		if in2(st.Else) {
			return fl.into(st.Else, in)
		}
	case *ast.SwitchStmt:
		if st.Init != nil {
			in, _ = fl.stmt(st.Init, in)
		}
		for _, c := range st.Body.List {
			if cc := c.(*ast.CaseClause); in2(cc) {
				out, _ := fl.list(cc.Body, in)
				return out
			}
		}
	case *ast.RangeStmt:
		if in2(st.Body) {
			if st.Value != nil && fl.is(st.Value) {
				vs, ok := fl.f.elems(st.X, fl.body, fl.given)
				fl.ok = fl.ok && ok
				in = vs
			} else if fl.sets(st.Body) || (st.Key != nil && fl.is(st.Key)) {
				fl.ok = false
			}
			out, _ := fl.list(st.Body.List, in)
			return out
		}
	case *ast.ForStmt:
		if in2(st.Body) {
			if fl.sets(st) {
				fl.ok = false
			}
			out, _ := fl.list(st.Body.List, in)
			return out
		}
	}
	return in
}

// stmt runs st, which pos is not in; end says it returns.
func (fl *flow) stmt(st ast.Stmt, in []value) ([]value, bool) {
	switch st := st.(type) {
	case *ast.ReturnStmt:
		return nil, true
	case *ast.AssignStmt:
		for i, l := range st.Lhs {
			if !fl.is(l) {
				continue
			}
			switch {
			case st.Tok == token.ADD_ASSIGN && len(st.Rhs) == 1:
				add, ok := fl.f.values(st.Rhs[0], fl.body, fl.given)
				fl.ok = fl.ok && ok
				var out []value
				for _, a := range in {
					for _, b := range add {
						out = append(out, value{sql: a.sql + b.sql, v: a.v})
					}
				}
				in = out
			case st.Tok != token.ASSIGN && st.Tok != token.DEFINE:
				fl.ok = false
			case len(st.Rhs) == len(st.Lhs):
				vs, ok := fl.f.exprValues(st.Rhs[i], fl.body, fl.given)
				fl.ok = fl.ok && ok
				in = vs
			case len(st.Rhs) == 1:
				vs, ok := fl.f.results(st.Rhs[0], i, fl.given)
				fl.ok = fl.ok && ok
				in = vs
			default:
				fl.ok = false
			}
		}
		return in, false
	case *ast.DeclStmt:
		if g, ok := st.Decl.(*ast.GenDecl); ok {
			for _, sp := range g.Specs {
				vs, ok := sp.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, name := range vs.Names {
					if fl.f.info.Defs[name] != fl.v {
						continue
					}
					if len(vs.Values) != len(vs.Names) {
						fl.ok = false
						continue
					}
					out, ok := fl.f.exprValues(vs.Values[i], fl.body, fl.given)
					fl.ok = fl.ok && ok
					in = out
				}
			}
		}
		return in, false
	case *ast.BlockStmt:
		return fl.list(st.List, in)
	case *ast.IfStmt:
		if st.Init != nil {
			in, _ = fl.stmt(st.Init, in)
		}
		a, aEnds := fl.list(st.Body.List, in)
		b, bEnds := in, false
		if st.Else != nil {
			b, bEnds = fl.stmt(st.Else, in)
		}
		return union(a, aEnds, b, bEnds)
	case *ast.SwitchStmt:
		if st.Init != nil {
			in, _ = fl.stmt(st.Init, in)
		}
		var out []value
		all, deflt := true, false
		for _, c := range st.Body.List {
			cc := c.(*ast.CaseClause)
			deflt = deflt || cc.List == nil
			vs, ends := fl.list(cc.Body, in)
			out, all = union(out, all, vs, ends)
		}
		if !deflt {
			out, all = union(out, all, in, false)
		}
		return out, all
	}
	if fl.sets(st) {
		fl.ok = false // set in a loop, a closure, ...
	}
	return in, false
}

// setOnce is the expression v is set to when body sets it once, by :=
// of as many values, to a concatenation (no call: a call's results are
// varValues'), and never again; or nil.
func setOnce(info *types.Info, body *ast.BlockStmt, v types.Object) ast.Expr {
	var rhs ast.Expr
	n := 0
	ast.Inspect(body, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.AssignStmt:
			for i, l := range x.Lhs {
				id, ok := l.(*ast.Ident)
				if !ok || (info.Defs[id] != v && info.Uses[id] != v) {
					continue
				}
				n++
				if x.Tok == token.DEFINE && len(x.Rhs) == len(x.Lhs) {
					if b, ok := ast.Unparen(x.Rhs[i]).(*ast.BinaryExpr); ok && b.Op == token.ADD {
						rhs = b
					}
				}
			}
		case *ast.RangeStmt:
			for _, e := range []ast.Expr{x.Key, x.Value} {
				if id, ok := e.(*ast.Ident); ok && (info.Defs[id] == v || info.Uses[id] == v) {
					n++
				}
			}
		case *ast.UnaryExpr:
			if id, ok := ast.Unparen(x.X).(*ast.Ident); ok && x.Op == token.AND && info.Uses[id] == v {
				n++
			}
		}
		return true
	})
	if n != 1 {
		return nil
	}
	return rhs
}

// only marks the values of vs not marked yet as set for store only.
func only(vs []value, store string) []value {
	out := make([]value, len(vs))
	for i, v := range vs {
		if v.only == "" {
			v.only = store
		}
		out[i] = v
	}
	return out
}

// union is the values after two ways, each of which may end.
func union(a []value, aEnds bool, b []value, bEnds bool) ([]value, bool) {
	switch {
	case aEnds && bEnds:
		return nil, true
	case aEnds:
		return b, false
	case bEnds:
		return a, false
	}
	out := append([]value{}, a...)
	for _, x := range b {
		if !slices.ContainsFunc(out, func(y value) bool {
			return y.sql == x.sql && y.v == x.v && y.only == x.only && maps.Equal(y.rec, x.rec)
		}) {
			out = append(out, x)
		}
	}
	return out, false
}

// is reports whether e names the variable.
func (fl *flow) is(e ast.Expr) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && (fl.f.info.Defs[id] == fl.v || fl.f.info.Uses[id] == fl.v)
}

// sets reports whether n assigns the variable or takes its address.
func (fl *flow) sets(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				found = found || fl.is(l)
			}
		case *ast.UnaryExpr:
			found = found || (n.Op == token.AND && fl.is(n.X))
		}
		return !found
	})
	return found
}

// exprValues are values', and for an index of a package map or slice
// literal (m[k], s[i]) each of its elements, for a call of a package
// function what it returns.
func (f *folder) exprValues(e ast.Expr, body *ast.BlockStmt, given map[types.Object]pair) ([]value, bool) {
	switch x := ast.Unparen(e).(type) {
	case *ast.IndexExpr:
		return f.elems(x.X, body, given)
	case *ast.CallExpr:
		if vs, ok := f.values(e, body, given); ok {
			return vs, true
		}
		return f.results(x, 0, given)
	}
	return f.values(e, body, given)
}

// results are, for a, b := f(...) (a package function or method) or
// a, ok := m[k], the values its i-th result may take, those of a method
// of one store's own type marked as that store's (storeOf).
func (f *folder) results(e ast.Expr, i int, given map[types.Object]pair) ([]value, bool) {
	switch e := ast.Unparen(e).(type) {
	case *ast.IndexExpr:
		if i == 0 {
			return f.elems(e.X, nil, given)
		}
	case *ast.CallExpr:
		id := calleeIdent(e) // a function's or a method's
		if id == nil {
			return nil, false
		}
		fd := f.funcs[f.info.Uses[id]]
		if fd == nil {
			return nil, false
		}
		return f.returns(fd, i, given)
	}
	return nil, false
}

// returns are the values fd's i-th result may take, marked as one
// store's when fd is a function of that store's package (storeOf).
func (f *folder) returns(fd *ast.FuncDecl, i int, given map[types.Object]pair) ([]value, bool) {
	store := storeOf(f.pkg, fd)
	var out []value
	ok := true
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			if len(n.Results) <= i {
				ok = false
				return false
			}
			vs, good := f.exprValues(n.Results[i], fd.Body, given)
			if !good {
				ok = false
			}
			out = append(out, only(vs, store)...)
		}
		return true
	})
	return out, ok && len(out) > 0
}

// ifaceMethod is the method of an interface that c calls (Locks'
// ForUpdate of t.locks.ForUpdate()), or nil.
func (f *folder) ifaceMethod(c *ast.CallExpr) *types.Func {
	sel, ok := ast.Unparen(c.Fun).(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	s := f.info.Selections[sel]
	if s == nil || s.Kind() != types.MethodVal || !types.IsInterface(s.Recv()) {
		return nil
	}
	fn, _ := s.Obj().(*types.Func)
	return fn
}

// implValues are the values the call of an interface's method c may
// take: the first results of that method of every type of the packages
// collected (peers) that has all the interface's methods (by name: the
// packages are type-checked apart), each marked as its store's
// (returns). Without one, or when one's results do not fold, the call
// is built at run time.
func (f *folder) implValues(c *ast.CallExpr) ([]value, bool) {
	fn := f.ifaceMethod(c)
	iface, _ := fn.Type().(*types.Signature).Recv().Type().Underlying().(*types.Interface)
	if iface == nil {
		return nil, false
	}
	var out []value
	for _, g := range f.peers {
		var impls []*ast.FuncDecl
		for obj, fd := range g.funcs {
			if m, ok := obj.(*types.Func); ok && fd.Recv != nil && m.Name() == fn.Name() && hasMethods(m, iface) {
				impls = append(impls, fd)
			}
		}
		slices.SortFunc(impls, func(a, b *ast.FuncDecl) int { return int(a.Pos() - b.Pos()) })
		for _, fd := range impls {
			vs, ok := g.returns(fd, 0, g.given)
			if !ok {
				return nil, false
			}
			out = append(out, vs...)
		}
	}
	out, _ = union(nil, false, out, false) // each once
	return out, len(out) > 0
}

// hasMethods reports whether the type of m's receiver has a method of
// each name of iface's.
func hasMethods(m *types.Func, iface *types.Interface) bool {
	recv := m.Type().(*types.Signature).Recv().Type()
	if p, ok := recv.(*types.Pointer); ok {
		recv = p.Elem()
	}
	ptr := types.NewPointer(recv)
	for i := range iface.NumMethods() {
		name := iface.Method(i).Name()
		if obj, _, _ := types.LookupFieldOrMethod(ptr, true, m.Pkg(), name); obj == nil {
			return false
		}
	}
	return true
}

// elems are the values of the elements of a slice or map literal: x
// itself, a local variable of body set to one, or a package variable.
func (f *folder) elems(x ast.Expr, body *ast.BlockStmt, given map[types.Object]pair) ([]value, bool) {
	lit, ok := ast.Unparen(x).(*ast.CompositeLit)
	if !ok {
		id, isID := ast.Unparen(x).(*ast.Ident)
		if !isID {
			return nil, false
		}
		lit = f.lits[f.info.Uses[id]]
		if lit == nil && body != nil {
			// A local variable set once, to a literal.
			ast.Inspect(body, func(n ast.Node) bool {
				if a, isA := n.(*ast.AssignStmt); isA && len(a.Lhs) == 1 && len(a.Rhs) == 1 {
					if l, isID := a.Lhs[0].(*ast.Ident); isID && f.info.Defs[l] == f.info.Uses[id] {
						lit, _ = a.Rhs[0].(*ast.CompositeLit)
					}
				}
				return lit == nil
			})
		}
		if lit == nil {
			return nil, false
		}
	}
	var out []value
	for _, el := range lit.Elts {
		if kv, isKV := el.(*ast.KeyValueExpr); isKV {
			el = kv.Value
		}
		vs, good := f.values(el, body, given)
		if !good {
			rec, isRec := f.record(el)
			if !isRec {
				return nil, false
			}
			vs = []value{{rec: rec}}
		}
		out = append(out, vs...)
	}
	return out, len(out) > 0
}

// record is the string fields that fold of a struct literal, or of the
// call of a package function that returns one (newBucketTable(...)).
func (f *folder) record(e ast.Expr) (map[string]string, bool) {
	env := map[types.Object]string{}
	if call, ok := ast.Unparen(e).(*ast.CallExpr); ok {
		id, ok := ast.Unparen(call.Fun).(*ast.Ident)
		if !ok {
			return nil, false
		}
		fd := f.funcs[f.info.Uses[id]]
		if fd == nil || fd.Recv != nil || len(fd.Body.List) != 1 {
			return nil, false
		}
		ret, ok := fd.Body.List[0].(*ast.ReturnStmt)
		if !ok || len(ret.Results) != 1 {
			return nil, false
		}
		i := 0
		for _, field := range fd.Type.Params.List {
			for _, n := range field.Names {
				if i < len(call.Args) {
					if v, ok := f.fold(call.Args[i], nil, 0); ok {
						env[f.info.Defs[n]] = v
					}
				}
				i++
			}
		}
		e = ret.Results[0]
	}
	lit, ok := ast.Unparen(e).(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	st, ok := f.info.Types[lit].Type.Underlying().(*types.Struct)
	if !ok {
		return nil, false
	}
	rec := map[string]string{}
	for i, el := range lit.Elts {
		name, val := "", el
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			k, ok := kv.Key.(*ast.Ident)
			if !ok {
				return nil, false
			}
			name, val = k.Name, kv.Value
		} else if i < st.NumFields() {
			name = st.Field(i).Name()
		}
		if v, ok := f.fold(val, env, 0); ok {
			rec[name] = v
		}
	}
	return rec, true
}

// pair is a PGQuery variable's SQLite text, and for PGInsert the column
// RETURNING adds.
type pair struct{ sql, col string }

// storeOf is the store a function of pkg runs on: one of package sqlite
// (db/sqlite), method or not, runs on SQLite only; of package postgres
// (db/postgres), on PostgreSQL only; of any other (db/internal/sqlcore),
// on both. Its name (dialect, rowLocks) says nothing.
func storeOf(pkg *types.Package, _ *ast.FuncDecl) string {
	if pkg == nil {
		return ""
	}
	switch pkg.Name() {
	case "sqlite":
		return "sqlite"
	case "postgres":
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

func isStoreTx(t types.Type) bool {
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

// calleeIdent is the name a call calls: f of f(...), pkg.F or x.M.
func calleeIdent(call *ast.CallExpr) *ast.Ident {
	switch fn := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		return fn
	case *ast.SelectorExpr:
		return fn.Sel
	}
	return nil
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

// IsWrapper reports whether f (Tx.Exec) is one of the wrappers,
// whose calls of each other pass their caller's text along.
func IsWrapper(f string) bool { return wrapper(f) }

func wrapper(f string) bool {
	_, ok := Wrappers[strings.TrimPrefix(f, "Tx.")]
	return ok && strings.HasPrefix(f, "Tx.")
}

// Composed is the calls whose text is a composed statement's (a
// sqlcore.Stmt's SQL), one line each as Dynamic's, sorted, each once.
func Composed(sites []Site) []string {
	return callLines(sites, func(s Site) bool { return s.Composed && !wrapper(s.Func) })
}

// Dynamic is the calls whose text is built at run time, but those that
// run on SQLite only, one line each
// ("Tx.ListDeadLetters: Query(q)"), sorted, with duplicates kept
// once; the wrappers' calls of each other are left out.
func Dynamic(sites []Site) []string {
	return callLines(sites, func(s Site) bool {
		return !s.Const && !s.Composed && s.Wrapper != "" && !wrapper(s.Func) && s.Only != "sqlite"
	})
}

// callLines are the sites keep keeps, one line each, sorted, each once.
func callLines(sites []Site, keep func(Site) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range sites {
		if !keep(s) {
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
