package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"go/types"

	"golang.org/x/tools/go/ast/astutil"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/typeutil"
)

// The dynamic walk (-trace). The static walk takes every branch a marked
// value reaches, error paths and the other tools' branches included, in an
// order that approximates evaluation; the dynamic walk records the path
// one real claim takes. It copies the module to a temporary folder, adds to
// the start of every function and function literal of its library packages
// (not cmd, examples, scripts, tests) a deferred call that records the
// function's entry and its return, builds the program traceProgram below
// against that copy and runs it: a store on a real SQLite file (as serve
// opens it, with the sweeper), one workflow of two tasks, the tool surface
// (mcpadapter/tools, everything on), one claim_next that is not recorded
// (so that what happens once per process is not counted), then one
// claim_next that finds a task, recorded from Surface.Call, the tool call,
// down to SQL and back to the tool result it returns.
//
// The record is one sequence over every goroutine (the caller, the store's
// hot lane, the SQLite writer); an entry is a visit to the callee's file,
// a return a visit to the caller's file, and repeats of the same file in a
// row merge into one stay, so that
//
//	returns = stays - distinct files
//
// counts the returns to a file already left, as the static walk does. With
// -leaves=false (the count), a call that enters no other function
// of the module (a helper: compute and return) is no stay, as in the static
// walk.

// traceProgram runs the recorded claim. It is built inside the instrumented
// copy of the module, so that it can reach its internal packages.
const traceProgram = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/internal/claimtrace"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "claimtrace:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir, err := os.MkdirTemp("", "claimtrace")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	drv, err := tgsqlite.Open(ctx, filepath.Join(dir, "graph.db"), tgsqlite.Options{})
	if err != nil {
		return err
	}
	st, err := taskgraph.OpenDriver(ctx, drv, taskgraph.Options{Sweep: true, Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.CreateWorkflow(ctx, "wf", []taskgraph.NodeSpec{{NodeID: "a"}, {NodeID: "b"}}); err != nil {
		return err
	}
	surf, err := tools.New(tools.Config{Logger: log, Store: st, Surface: manifest.NewSurface(manifest.Options{})})
	if err != nil {
		return err
	}
	args := json.RawMessage(` + "`" + `{"owner":"w1","lease_ms":60000}` + "`" + `)
	call := func() error {
		res, err := surf.Call(ctx, tools.Caller{Arrival: time.Now()}, manifest.ToolClaim, args)
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("claim: %s", res.StructuredContent)
		}
		return nil
	}
	if err := call(); err != nil { // once per process: not recorded
		return err
	}
	claimtrace.Start()
	err = call()
	claimtrace.Stop()
	if err != nil {
		return err
	}
	claimtrace.Print(os.Stdout)
	return nil
}
`

// traceRuntime records the entries and returns, per goroutine.
const traceRuntime = `// Package claimtrace records function entries and returns for
// scripts/claimwalk -trace. It exists only in the instrumented copy.
package claimtrace

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

type event struct {
	gid   uint64
	enter bool
	file  string
	fn    string
}

var (
	on     atomic.Bool
	mu     sync.Mutex
	events []event
)

// Start begins recording.
func Start() { on.Store(true) }

// Stop ends recording.
func Stop() { on.Store(false) }

func gid() uint64 {
	var b [64]byte
	s := b[:runtime.Stack(b[:], false)]
	s = bytes.TrimPrefix(s, []byte("goroutine "))
	if i := bytes.IndexByte(s, ' '); i > 0 {
		s = s[:i]
	}
	n, _ := strconv.ParseUint(string(s), 10, 64)
	return n
}

func nothing() {}

// Enter records that fn of file was entered; the function it returns
// records its return.
func Enter(file, fn string) func() {
	if !on.Load() {
		return nothing
	}
	g := gid()
	mu.Lock()
	events = append(events, event{gid: g, enter: true, file: file, fn: fn})
	mu.Unlock()
	return func() {
		mu.Lock()
		events = append(events, event{gid: g, file: file, fn: fn})
		mu.Unlock()
	}
}

// Print writes one line per event: goroutine, > or <, file, function.
func Print(w io.Writer) {
	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		d := "<"
		if e.enter {
			d = ">"
		}
		fmt.Fprintf(w, "%d %s %s %s\n", e.gid, d, e.file, e.fn)
	}
}
`

// traced are the folders whose packages are instrumented; below them,
// test helpers and fixtures are not.
var traced = []string{"lease", "manifest", "mcpadapter", "skills", "taskgraph"}

// runTrace runs the dynamic walk over the module in dir.
func runTrace(dir string, leaves, toSQL, verbose bool) error {
	tmp, err := os.MkdirTemp("", "claimwalk-trace")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	sqlFuncs, err := sqlCallers(dir)
	if err != nil {
		return err
	}
	mod, err := copyInstrumented(dir, tmp, sqlFuncs)
	if err != nil {
		return err
	}
	for name, text := range map[string]string{
		"internal/claimtrace/claimtrace.go": traceRuntime,
		"internal/claimtrace/run/main.go":   traceProgram,
	} {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "github.com/graph-engineering/graph-engineering-mcp", mod)), 0o644); err != nil {
			return err
		}
	}
	cmd := exec.Command("go", "run", "./internal/claimtrace/run")
	cmd.Dir = tmp
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("run the instrumented claim: %w", err)
	}
	evs, err := parseEvents(out)
	if err != nil {
		return err
	}
	evs = prune(evs, leaves, toSQL)
	trail := stays(evs)
	files := map[string]bool{}
	seen := map[string]bool{}
	for i, s := range trail {
		files[s.file] = true
		if verbose {
			mark := " "
			if seen[s.file] {
				mark = "↩"
			}
			seen[s.file] = true
			fmt.Printf("%3d %s %s  %s\n", i+1, mark, s.file, s.fn)
		}
	}
	fmt.Printf("%d stays in %d files, %d returns to a file already left\n", len(trail), len(files), len(trail)-len(files))
	return nil
}

type event struct {
	gid   uint64
	enter bool
	file  string
	fn    string
	sql   bool // fn calls database/sql itself
}

func parseEvents(out []byte) ([]event, error) {
	var evs []event
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			return nil, fmt.Errorf("trace: bad line %q", sc.Text())
		}
		g, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, err
		}
		fn, sql := strings.CutSuffix(f[3], "!")
		evs = append(evs, event{gid: g, enter: f[1] == ">", file: f[2], fn: fn, sql: sql})
	}
	return evs, sc.Err()
}

// prune removes the visits that are not stays: with leaves false, a
// visit during which no other function is entered (in any goroutine: a
// call that hands work to another goroutine and waits is no helper); with
// toSQL, a visit during which no function that calls database/sql is
// entered. A visit is its entry and its return.
func prune(evs []event, leaves, toSQL bool) []event {
	end := make([]int, len(evs)) // entry → index of its return (len when none)
	stacks := map[uint64][]int{}
	for i, e := range evs {
		end[i] = len(evs)
		if e.enter {
			stacks[e.gid] = append(stacks[e.gid], i)
			continue
		}
		if st := stacks[e.gid]; len(st) > 0 {
			end[st[len(st)-1]] = i
			stacks[e.gid] = st[:len(st)-1]
		}
	}
	drop := map[int]bool{}
	for i, e := range evs {
		if !e.enter {
			continue
		}
		other, sql := false, e.sql
		for k := i + 1; k < end[i] && k < len(evs); k++ {
			if evs[k].enter {
				other = true
				sql = sql || evs[k].sql
			}
		}
		if (!leaves && !other) || (toSQL && !sql) {
			drop[i] = true
			if end[i] < len(evs) {
				drop[end[i]] = true
			}
		}
	}
	var out []event
	for i, e := range evs {
		if !drop[i] {
			out = append(out, e)
		}
	}
	return out
}

// stays turns the events into the sequence of files visited: an entry
// visits the callee's file, a return the caller's (when the caller is
// recorded), repeats in a row merged.
func stays(evs []event) []stay {
	stacks := map[uint64][]event{}
	var trail []stay
	visit := func(file, fn string) {
		if n := len(trail); n > 0 && trail[n-1].file == file {
			return
		}
		trail = append(trail, stay{file: file, fn: fn})
	}
	for _, e := range evs {
		st := stacks[e.gid]
		if e.enter {
			stacks[e.gid] = append(st, e)
			visit(e.file, e.fn)
			continue
		}
		if n := len(st); n > 0 {
			st = st[:n-1]
			stacks[e.gid] = st
		}
		if n := len(st); n > 0 {
			visit(st[n-1].file, st[n-1].fn)
		}
	}
	return trail
}

// copyInstrumented copies the module in dir to tmp, instrumenting the
// library packages, and returns the module path.
func copyInstrumented(dir, tmp string, sqlFuncs map[string]bool) (string, error) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	mod := ""
	for _, l := range strings.Split(string(gomod), "\n") {
		if strings.HasPrefix(l, "module ") {
			mod = strings.TrimSpace(strings.TrimPrefix(l, "module "))
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "scripts", "examples":
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(tmp, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if instrumented(rel) {
			if src, err = instrument(rel, src, mod, sqlFuncs); err != nil {
				return fmt.Errorf("instrument %s: %w", rel, err)
			}
		}
		return os.WriteFile(filepath.Join(tmp, rel), src, 0o644)
	})
	return mod, err
}

func instrumented(rel string) bool {
	rel = filepath.ToSlash(rel)
	if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.Contains(rel, "testdata/") {
		return false
	}
	for _, t := range traced {
		if strings.HasPrefix(rel, t+"/") {
			return !strings.Contains(rel, "storetest/") && !strings.Contains(rel, "testwait/") && !strings.Contains(rel, "pgtest/")
		}
	}
	return false
}

// instrument adds to every function body of src a first statement
// `defer claimtrace.Enter(file, name)()`.
func instrument(rel string, src []byte, mod string, sqlFuncs map[string]bool) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	rel = filepath.ToSlash(rel)
	hook := func(fn ast.Node, name string) ast.Stmt {
		if sqlFuncs[funcKey(rel, fset.Position(fn.Pos()).Offset)] {
			name += "!"
		}
		return &ast.DeferStmt{Call: &ast.CallExpr{Fun: &ast.CallExpr{
			Fun:  &ast.SelectorExpr{X: ast.NewIdent("claimtrace"), Sel: ast.NewIdent("Enter")},
			Args: []ast.Expr{&ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(rel)}, &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(name)}},
		}}}
	}
	any := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			t := fd.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			if ix, ok := t.(*ast.IndexExpr); ok {
				t = ix.X
			}
			if ix, ok := t.(*ast.IndexListExpr); ok {
				t = ix.X
			}
			if id, ok := t.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if lit, ok := n.(*ast.FuncLit); ok {
				lit.Body.List = append([]ast.Stmt{hook(lit, name+".func")}, lit.Body.List...)
			}
			return true
		})
		fd.Body.List = append([]ast.Stmt{hook(fd, name)}, fd.Body.List...)
		any = true
	}
	if !any {
		return src, nil
	}
	astutil.AddImport(fset, f, mod+"/internal/claimtrace")
	var buf bytes.Buffer
	if err := format.Node(&buf, fset, f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func funcKey(rel string, offset int) string {
	return filepath.ToSlash(rel) + ":" + strconv.Itoa(offset)
}

// sqlCallers returns the functions and function literals of the module in
// dir that call database/sql or pgx themselves, by funcKey.
func sqlCallers(dir string) (map[string]bool, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Dir: dir}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range pkgs {
		for _, f := range p.Syntax {
			file := p.Fset.Position(f.Pos()).Filename
			rel, err := filepath.Rel(dir, file)
			if err != nil {
				continue
			}
			var fns []ast.Node // the enclosing functions
			ast.Inspect(f, func(n ast.Node) bool {
				if n == nil {
					fns = fns[:len(fns)-1]
					return true
				}
				switch n := n.(type) {
				case *ast.CallExpr:
					fn, ok := typeutil.Callee(p.TypesInfo, n).(*types.Func)
					if ok && fn.Pkg() != nil && len(fns) > 0 {
						if q := fn.Pkg().Path(); q == "database/sql" || strings.HasPrefix(q, "github.com/jackc/pgx") {
							var top ast.Node
							for i := len(fns) - 1; i >= 0; i-- {
								if fns[i] != nil {
									top = fns[i]
									break
								}
							}
							if top != nil {
								out[funcKey(rel, p.Fset.Position(top.Pos()).Offset)] = true
							}
						}
					}
				}
				switch n.(type) {
				case *ast.FuncDecl, *ast.FuncLit:
					fns = append(fns, n)
				default:
					fns = append(fns, nil)
				}
				return true
			})
		}
	}
	return out, nil
}
