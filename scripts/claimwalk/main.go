// Command claimwalk counts how often a request's walk through the code
// returns to a file it had already left: the measure the code review of
// 99a69c7 (section 4) used for a claim ("36 stays in 14 files and 22 returns
// to a file already left").
//
// The walk is static and follows data: it starts at one function with some
// of its parameters marked (the claim's parameters), and visits the
// function's body in evaluation order. A call is followed when one of its
// arguments, its receiver, or a closure passed to it uses a marked value;
// the callee's matching parameters are marked in turn, and whatever a
// followed call returns is marked where it is assigned. A closure passed to
// a followed call is walked where the callee calls it (so a transaction
// body written in claim.go and run by write.go counts as a visit back to
// claim.go), or, if the callee hands it on to code the walk does not follow
// (a goroutine fed through a channel, the standard library), where the
// callee was called. A call through an interface is followed into the
// module's implementations whose package path contains -impl (none when
// -impl is empty: "without following the driver"). A function already on
// the stack is not entered again, and with -once (the default) a function
// is entered at most once in the whole walk. Functions outside the module
// (the standard library, the SDK) are not entered: the walk stays in the
// caller. Being static, the walk takes every branch (error paths included)
// unless -skip names the functions of the branches it must not take.
//
// The walk yields the sequence of files visited, with repeats of the same
// file in a row merged: each element is a "stay". Every stay in a file that
// an earlier stay was in is a return to a file already left, so
//
//	returns = stays - distinct files
//
// Options that change what a stay is:
//
//	-leaves=false  a visit to a helper (a function that enters no other
//	               function of the module) is not a stay
//	-sql           only visits that lead to SQL (a call into database/sql
//	               or pgx) are stays
//	-stop P,…      functions of packages ending in P are one stay each:
//	               their file is entered, their body is not walked
//	-skip F,…      functions named F (as -root names them, or a suffix)
//	               are not followed
//
// Usage (from this folder; -dir names the module it walks, by default the
// one it sits in):
//
//	go run . -root 'taskgraph.(*Store).Claim' -params req -impl tgsqlite -leaves=false
//
// # The claim count of issue 25
//
// The issue asks how often a claim's walk from the tool call to SQL and
// back returns to a file already left. The static walk cannot answer that
// for one path: it takes every branch a marked value reaches (claim by id,
// expiry, heartbeats and completions of the hot lane, request ids) in an
// order that only approximates evaluation. So the count is taken
// with -trace (trace.go): the dynamic walk of one real claim_next that
// finds a task, recorded from tools.(*Surface).Call (the transport-free
// tool call both transports make) through the store and the SQLite driver
// to SQL and back to the result, over every goroutine it crosses:
//
//	go run . -trace -sql       # the count: visits that lead to SQL
//	go run . -trace -leaves=false -v  # also the side trips that compute
//	go run . -trace            # every function visit
//
// -sql counts only the visits during which a function that calls
// database/sql itself is entered: the way to SQL and back. Side trips that
// compute and return (argument decoding, rendering, event canonical JSON,
// the receipt) are not on that way; -leaves=false counts them too, and a
// plain -trace counts even one-line helpers. Timing-dependent branches
// (the lease clock's step, the hot lane's gather) move the counts by a few
// from run to run.
//
// At fd02489: -sql 28 (37 stays in 9 files), -leaves=false 69 to 73,
// every visit 198. After moving the SQLite writer's statement cache into
// tx.go beside the statements that use it: -sql 24, -leaves=false 65 to
// 69. After moving the SQLite writer's transaction control (and the
// cache's home) into writer.go, the statement helpers and the chain-head
// read beside Fetch and Apply in update.go, the event linking into
// write.go beside flushRows (now flushRound), and the tool call beside
// its dispatch in mcpadapter/tools/tools.go: -sql 11 (17 stays in 6 files). After the
// driver's Apply links the events itself (tgdriver.Apply.Link), reading
// the chain heads where it records the events instead of the domain
// reading them between Fetch and Apply: -sql 9 (15 stays in 6 files). What
// remains is the domain ⇄ driver shape: hot.go ⇄ writer.go (the driver
// runs the batch's closure), hot.go ⇄ update.go (Fetch), write.go ⇄
// update.go (Apply), and the returns up the stack to claim.go and
// tools.go.
//
// The HTTP front and the SDK are before the tool call. Their static
// segments, with helpers not counted as stays (-leaves=false) and -skip
// naming the branches of refusals, errors and the other tools, are:
//
//	# 1. The HTTP front: the request, up to the hand-off to the SDK.
//	go run . -root 'mcpadapter/httpfront.(*Handler).serveMCP' -params r \
//		-stop taskgraph,manifest,lease -leaves=false -skip 'WriteError,overflowToolError'
//	# 2. The tool surface: the tool call the SDK hands on, up to the store.
//	go run . -root 'mcpadapter/tools.(*Surface).Call' -params tool,rawArgs \
//		-stop taskgraph,manifest,lease -leaves=false \
//		-skip '.Heartbeat,.Complete,.Fail,.FailRetryAfter,.Release,.Cancel,.CreateTask,(*Surface).inspect,(*Surface).toolError,(*Surface).internal,(*Surface).unavailableRPC,(*Surface).unavailable'
//	# 3. The store, following the SQLite driver, every branch.
//	go run . -root 'taskgraph.(*Store).Claim' -params req -impl tgsqlite -leaves=false
//
// At fd02489 they were 17, 12 and 80. At 99a69c7 (before the rooms)
// segment 1 was 18 (root mcpadapter.(*HTTPHandler).serveMCP, skipping
// writeRPCError and overflowToolError) and segment 3 was 46. The code
// review's 22 came from a static walk whose rules it did not record; none
// of this tool's option sets reproduces it, so compare this tool's numbers
// with each other, not with the review's.
//
// It is a module of its own, so that the project does not depend on
// golang.org/x/tools.
//
// -root names a function as package-path-suffix.Func or
// package-path-suffix.(*Type).Method or package-path-suffix.Type.Method.
// -v prints every stay with the function that was entered or returned to.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/typeutil"
)

type decl struct {
	fn   *ast.FuncDecl
	pkg  *packages.Package
	file string
}

// closure is a function literal bound to a variable or passed as an
// argument: it runs with the marks of the frame that wrote it.
type closure struct {
	lit   *ast.FuncLit
	pkg   *packages.Package
	file  string
	frame *frame
}

type frame struct {
	pkg     *packages.Package
	file    string
	name    string
	marked  map[types.Object]bool
	binds   map[types.Object]*closure
	outer   *frame // the frame a closure was written in
	closure bool
}

type walker struct {
	root     string
	decls    map[*types.Func]*decl
	pkgs     []*packages.Package
	impl     string
	stack    map[any]bool
	ran      map[*ast.FuncLit]bool
	walked   map[*types.Func]bool
	once     bool
	maxDepth int
	stop     []string
	skip     []string
	toSQL    bool // only visits that lead to SQL are stays
	sql      int  // SQL sites seen so far
	leaves   bool // a visit that enters nothing further is a stay
	entered  int  // visits so far
	trail    []stay
	verbose  bool
	depth    int
}

type stay struct {
	file, fn string
}

func main() {
	root := flag.String("root", "", "the function the walk starts at (package-path-suffix.Func, suffix.(*T).M)")
	params := flag.String("params", "", "comma-separated parameter names the walk follows")
	impl := flag.String("impl", "", "follow interface calls into implementations whose package path contains this")
	verbose := flag.Bool("v", false, "print every stay")
	maxDepth := flag.Int("depth", 0, "enter functions at most this many calls deep (0: no bound)")
	stop := flag.String("stop", "", "comma-separated package path suffixes whose functions are one stay each: the walk enters their file but not their body")
	leaves := flag.Bool("leaves", true, "count a visit to a function that enters no other function of the module (a helper) as a stay")
	toSQL := flag.Bool("sql", false, "count only the visits that lead to SQL (a call into database/sql or pgx): helpers that compute and return are not stays")
	skip := flag.String("skip", "", "comma-separated function names (as -root names them, or a suffix) the walk does not follow: the branches of another tool")
	once := flag.Bool("once", true, "enter each function at most once (a later call of a function already walked stays in the caller)")
	dir := flag.String("dir", "../..", "the module to walk (default: the module this tool sits in)")
	trace := flag.Bool("trace", false, "record the walk of one real claim_next instead (see trace.go); -leaves and -v apply")
	flag.Parse()
	if *trace {
		wd, err := filepath.Abs(*dir)
		if err == nil {
			err = runTrace(wd, *leaves, *toSQL, *verbose)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "claimwalk:", err)
			os.Exit(1)
		}
		return
	}
	if *root == "" || *params == "" {
		fmt.Fprintln(os.Stderr, "usage: claimwalk -root FUNC -params NAMES [-impl PKG] [-v]")
		os.Exit(2)
	}
	wd, err := filepath.Abs(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports | packages.NeedDeps | packages.NeedModule, Dir: wd}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := &walker{root: wd, decls: map[*types.Func]*decl{}, impl: *impl, stack: map[any]bool{}, ran: map[*ast.FuncLit]bool{}, walked: map[*types.Func]bool{}, once: *once, maxDepth: *maxDepth, stop: splitList(*stop), skip: splitList(*skip), toSQL: *toSQL, leaves: *leaves, verbose: *verbose}
	mod := ""
	for _, p := range pkgs {
		if p.Module != nil {
			mod = p.Module.Path
		}
	}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if mod == "" || !strings.HasPrefix(p.PkgPath, mod) || p.TypesInfo == nil {
			return
		}
		w.pkgs = append(w.pkgs, p)
		for _, f := range p.Syntax {
			name := p.Fset.Position(f.Pos()).Filename
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if obj, ok := p.TypesInfo.Defs[fd.Name].(*types.Func); ok {
					w.decls[obj] = &decl{fn: fd, pkg: p, file: name}
				}
			}
		}
	})
	start := w.find(*root)
	if start == nil {
		fmt.Fprintf(os.Stderr, "claimwalk: no function %s\n", *root)
		os.Exit(1)
	}
	want := map[string]bool{}
	for _, p := range strings.Split(*params, ",") {
		want[strings.TrimSpace(p)] = true
	}
	marked := map[int]bool{}
	i := 0
	if start.fn.Recv != nil {
		for _, f := range start.fn.Recv.List {
			for _, n := range f.Names {
				if want[n.Name] {
					marked[-1] = true
				}
			}
		}
	}
	for _, f := range start.fn.Type.Params.List {
		for _, n := range f.Names {
			if want[n.Name] {
				marked[i] = true
			}
			i++
		}
	}
	w.enter(start, marked, nil)
	files := map[string]bool{}
	for _, s := range w.trail {
		files[s.file] = true
	}
	if w.verbose {
		seen := map[string]bool{}
		for i, s := range w.trail {
			mark := " "
			if seen[s.file] {
				mark = "↩"
			}
			seen[s.file] = true
			fmt.Printf("%3d %s %s  %s\n", i+1, mark, s.file, s.fn)
		}
	}
	var names []string
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	fmt.Printf("%d stays in %d files, %d returns to a file already left\n", len(w.trail), len(files), len(w.trail)-len(files))
	fmt.Printf("files: %s\n", strings.Join(names, " "))
}

// find resolves a -root name.
func (w *walker) find(name string) *decl {
	for obj, d := range w.decls {
		if qualified(obj) == name || strings.HasSuffix(qualified(obj), "/"+name) {
			return d
		}
	}
	return nil
}

func qualified(f *types.Func) string {
	sig := f.Type().(*types.Signature)
	pkg := f.Pkg().Path()
	if r := sig.Recv(); r != nil {
		t := r.Type()
		ptr := ""
		if p, ok := t.(*types.Pointer); ok {
			t, ptr = p.Elem(), "*"
		}
		n := t.(*types.Named).Obj().Name()
		if ptr != "" {
			return fmt.Sprintf("%s.(*%s).%s", pkg, n, f.Name())
		}
		return fmt.Sprintf("%s.%s.%s", pkg, n, f.Name())
	}
	return pkg + "." + f.Name()
}

func (w *walker) rel(file string) string {
	if r, err := filepath.Rel(w.root, file); err == nil {
		return r
	}
	return file
}

func (w *walker) emit(file, fn string) {
	file = w.rel(file)
	if n := len(w.trail); n > 0 && w.trail[n-1].file == file {
		return
	}
	w.trail = append(w.trail, stay{file: file, fn: fn})
}

// enter walks a declared function whose parameters marked (by index; -1 is
// the receiver) carry marked values; binds are closures passed to it.
func (w *walker) enter(d *decl, marked map[int]bool, binds map[int]*closure) {
	obj := d.pkg.TypesInfo.Defs[d.fn.Name].(*types.Func)
	if w.stack[obj] || (w.once && w.walked[obj]) || w.skipped(obj) {
		return
	}
	for _, p := range w.stop {
		if strings.HasSuffix(obj.Pkg().Path(), p) {
			w.walked[obj] = true
			w.emit(d.file, d.fn.Name.Name)
			return
		}
	}
	w.walked[obj] = true
	w.stack[obj] = true
	defer delete(w.stack, obj)
	fr := &frame{pkg: d.pkg, file: d.file, name: d.fn.Name.Name, marked: map[types.Object]bool{}, binds: map[types.Object]*closure{}}
	if d.fn.Recv != nil && marked[-1] {
		for _, f := range d.fn.Recv.List {
			for _, n := range f.Names {
				fr.marked[d.pkg.TypesInfo.Defs[n]] = true
			}
		}
	}
	w.bindParams(fr, d.fn.Type, marked, binds)
	if w.maxDepth > 0 && w.depth >= w.maxDepth {
		return
	}
	w.depth++
	defer func() { w.depth-- }()
	before, sql, entered := len(w.trail), w.sql, w.entered
	w.entered++
	w.emit(d.file, fr.name)
	w.block(fr, d.fn.Body)
	w.prune(before, sql, entered)
}

// prune drops the stays a visit added when it led to no SQL (with -sql),
// or when it entered nothing further (with -leaves=false).
func (w *walker) prune(before, sql, entered int) {
	if len(w.trail) <= before {
		return
	}
	if (w.toSQL && w.sql == sql) || (!w.leaves && w.entered == entered+1) {
		w.trail = w.trail[:before]
	}
}

func (w *walker) bindParams(fr *frame, ft *ast.FuncType, marked map[int]bool, binds map[int]*closure) {
	i := 0
	for _, f := range ft.Params.List {
		names := f.Names
		if len(names) == 0 {
			i++
			continue
		}
		for _, n := range names {
			o := fr.pkg.TypesInfo.Defs[n]
			if marked[i] {
				fr.marked[o] = true
			}
			if c := binds[i]; c != nil {
				fr.binds[o] = c
			}
			i++
		}
	}
}

// runClosure walks a closure where it is called.
func (w *walker) runClosure(c *closure, marked map[int]bool, binds map[int]*closure) {
	if w.stack[c.lit] {
		return
	}
	w.ran[c.lit] = true
	w.stack[c.lit] = true
	defer delete(w.stack, c.lit)
	fr := &frame{pkg: c.pkg, file: c.file, name: c.frame.name + ".func", marked: map[types.Object]bool{}, binds: map[types.Object]*closure{}, outer: c.frame, closure: true}
	w.bindParams(fr, c.lit.Type, marked, binds)
	before, sql, entered := len(w.trail), w.sql, w.entered
	w.entered++
	w.emit(c.file, fr.name)
	w.block(fr, c.lit.Body)
	w.prune(before, sql, entered)
}

func (fr *frame) isMarked(o types.Object) bool {
	for f := fr; f != nil; f = f.outer {
		if f.marked[o] {
			return true
		}
	}
	return false
}

func (fr *frame) bound(o types.Object) *closure {
	for f := fr; f != nil; f = f.outer {
		if c := f.binds[o]; c != nil {
			return c
		}
	}
	return nil
}

// uses reports whether e uses a marked value (a closure that captures one
// counts).
func (w *walker) uses(fr *frame, e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if found {
			return false
		}
		if id, ok := n.(*ast.Ident); ok {
			if o := fr.pkg.TypesInfo.Uses[id]; o != nil && fr.isMarked(o) {
				found = true
			}
		}
		return true
	})
	return found
}

func (w *walker) block(fr *frame, b *ast.BlockStmt) {
	if b == nil {
		return
	}
	for _, s := range b.List {
		w.stmt(fr, s)
	}
}

func (w *walker) stmt(fr *frame, s ast.Stmt) {
	switch s := s.(type) {
	case *ast.AssignStmt:
		for _, r := range s.Rhs {
			w.expr(fr, r)
		}
		w.assign(fr, s.Lhs, s.Rhs)
	case *ast.DeclStmt:
		if g, ok := s.Decl.(*ast.GenDecl); ok {
			for _, sp := range g.Specs {
				if vs, ok := sp.(*ast.ValueSpec); ok {
					for _, v := range vs.Values {
						w.expr(fr, v)
					}
					lhs := make([]ast.Expr, len(vs.Names))
					for i, n := range vs.Names {
						lhs[i] = n
					}
					w.assign(fr, lhs, vs.Values)
				}
			}
		}
	case *ast.ExprStmt:
		w.expr(fr, s.X)
	case *ast.ReturnStmt:
		for _, r := range s.Results {
			w.expr(fr, r)
		}
	case *ast.IfStmt:
		if s.Init != nil {
			w.stmt(fr, s.Init)
		}
		w.expr(fr, s.Cond)
		w.block(fr, s.Body)
		if s.Else != nil {
			w.stmt(fr, s.Else)
		}
	case *ast.BlockStmt:
		w.block(fr, s)
	case *ast.ForStmt:
		if s.Init != nil {
			w.stmt(fr, s.Init)
		}
		if s.Cond != nil {
			w.expr(fr, s.Cond)
		}
		w.block(fr, s.Body)
		if s.Post != nil {
			w.stmt(fr, s.Post)
		}
	case *ast.RangeStmt:
		w.expr(fr, s.X)
		if w.uses(fr, s.X) {
			for _, e := range []ast.Expr{s.Key, s.Value} {
				if id, ok := e.(*ast.Ident); ok {
					if o := fr.pkg.TypesInfo.Defs[id]; o != nil {
						fr.marked[o] = true
					} else if o := fr.pkg.TypesInfo.Uses[id]; o != nil {
						fr.marked[o] = true
					}
				}
			}
		}
		w.block(fr, s.Body)
	case *ast.SwitchStmt:
		if s.Init != nil {
			w.stmt(fr, s.Init)
		}
		if s.Tag != nil {
			w.expr(fr, s.Tag)
		}
		for _, c := range s.Body.List {
			cc := c.(*ast.CaseClause)
			for _, e := range cc.List {
				w.expr(fr, e)
			}
			for _, st := range cc.Body {
				w.stmt(fr, st)
			}
		}
	case *ast.TypeSwitchStmt:
		if s.Init != nil {
			w.stmt(fr, s.Init)
		}
		w.stmt(fr, s.Assign)
		for _, c := range s.Body.List {
			for _, st := range c.(*ast.CaseClause).Body {
				w.stmt(fr, st)
			}
		}
	case *ast.SelectStmt:
		for _, c := range s.Body.List {
			cc := c.(*ast.CommClause)
			if cc.Comm != nil {
				w.stmt(fr, cc.Comm)
			}
			for _, st := range cc.Body {
				w.stmt(fr, st)
			}
		}
	case *ast.DeferStmt:
		w.expr(fr, s.Call)
	case *ast.GoStmt:
		w.expr(fr, s.Call)
	case *ast.LabeledStmt:
		w.stmt(fr, s.Stmt)
	case *ast.SendStmt:
		w.expr(fr, s.Value)
	case *ast.IncDecStmt:
	}
}

// assign marks what a marked right-hand side is assigned to, and binds
// variables assigned a function literal.
func (w *walker) assign(fr *frame, lhs, rhs []ast.Expr) {
	any := false
	for _, r := range rhs {
		if w.uses(fr, r) {
			any = true
		}
	}
	for i, l := range lhs {
		id, ok := l.(*ast.Ident)
		if !ok {
			// x.f = marked: mark x.
			if sel, ok := l.(*ast.SelectorExpr); ok && any {
				if xid, ok := sel.X.(*ast.Ident); ok {
					if o := fr.pkg.TypesInfo.Uses[xid]; o != nil {
						fr.marked[o] = true
					}
				}
			}
			continue
		}
		o := fr.pkg.TypesInfo.Defs[id]
		if o == nil {
			o = fr.pkg.TypesInfo.Uses[id]
		}
		if o == nil {
			continue
		}
		if any {
			fr.marked[o] = true
		}
		if len(rhs) == len(lhs) {
			if lit, ok := rhs[i].(*ast.FuncLit); ok {
				fr.binds[o] = &closure{lit: lit, pkg: fr.pkg, file: fr.file, frame: fr}
			}
		}
	}
}

// expr walks the calls in e in evaluation order.
func (w *walker) expr(fr *frame, e ast.Expr) {
	if e == nil {
		return
	}
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // walked where it is called
		case *ast.CallExpr:
			for _, a := range n.Args {
				w.expr(fr, a)
			}
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				w.expr(fr, sel.X)
			}
			w.call(fr, n)
			return false
		}
		return true
	})
}

func (w *walker) call(fr *frame, call *ast.CallExpr) {
	info := fr.pkg.TypesInfo
	if fn, ok := typeutil.Callee(info, call).(*types.Func); ok && fn.Pkg() != nil {
		if p := fn.Pkg().Path(); p == "database/sql" || strings.HasPrefix(p, "github.com/jackc/pgx") {
			w.sql++
		}
	}
	marked := map[int]bool{}
	binds := map[int]*closure{}
	anyMarked := false
	for i, a := range call.Args {
		if w.uses(fr, a) {
			marked[i], anyMarked = true, true
		}
		if lit, ok := a.(*ast.FuncLit); ok {
			binds[i] = &closure{lit: lit, pkg: fr.pkg, file: fr.file, frame: fr}
		} else if id, ok := a.(*ast.Ident); ok {
			if c := fr.bound(info.Uses[id]); c != nil {
				binds[i] = c
			}
		}
	}
	var recv ast.Expr
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
		if s := info.Selections[sel]; s != nil {
			recv = sel.X
		}
	}
	if recv != nil && w.uses(fr, recv) {
		marked[-1], anyMarked = true, true
	}
	// A call of a closure: a variable bound to a literal, or a literal
	// called in place.
	var c *closure
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		c = fr.bound(info.Uses[f])
	case *ast.FuncLit:
		c = &closure{lit: f, pkg: fr.pkg, file: fr.file, frame: fr}
	}
	if c != nil {
		w.runClosure(c, marked, binds)
		w.emit(fr.file, fr.name)
		return
	}
	if !anyMarked {
		return
	}
	var targets []*decl
	if fn, ok := typeutil.Callee(info, call).(*types.Func); ok {
		if d := w.decls[fn]; d != nil {
			targets = append(targets, d)
		} else if sig := fn.Type().(*types.Signature); sig.Recv() != nil && types.IsInterface(sig.Recv().Type()) && w.impl != "" {
			targets = w.implementations(fn, sig.Recv().Type())
		}
	}
	for _, d := range targets {
		w.enter(d, marked, binds)
		w.emit(fr.file, fr.name)
	}
	// A closure handed to code the walk does not follow (the standard
	// library, a driver not followed, a goroutine fed through a channel) is
	// called there: walk it as called by this call.
	for i := range call.Args {
		if c := binds[i]; c != nil && !w.ran[c.lit] && w.uses(fr, call.Args[i]) {
			w.runClosure(c, nil, nil)
			w.emit(fr.file, fr.name)
		}
	}
}

// implementations returns the methods named like fn of the module's types
// that implement iface, in packages whose path contains w.impl.
func (w *walker) implementations(fn *types.Func, iface types.Type) []*decl {
	it, ok := iface.Underlying().(*types.Interface)
	if !ok {
		return nil
	}
	var out []*decl
	for _, p := range w.pkgs {
		if !strings.Contains(p.PkgPath, w.impl) {
			continue
		}
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok {
				continue
			}
			for _, t := range []types.Type{tn.Type(), types.NewPointer(tn.Type())} {
				if !types.Implements(t, it) {
					continue
				}
				obj, _, _ := types.LookupFieldOrMethod(t, true, p.Types, fn.Name())
				if m, ok := obj.(*types.Func); ok {
					if d := w.decls[m]; d != nil {
						out = append(out, d)
					}
				}
				break
			}
		}
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// skipped reports whether fn is one of -skip.
func (w *walker) skipped(fn *types.Func) bool {
	q := qualified(fn)
	for _, s := range w.skip {
		if q == s || strings.HasSuffix(q, s) {
			return true
		}
	}
	return false
}
