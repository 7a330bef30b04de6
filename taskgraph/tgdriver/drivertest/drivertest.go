package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/internal/sqlrows"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Harness opens drivers of one kind on fresh databases.
type Harness interface {
	// Name is the driver's tgdriver.Info().Name ("sqlite", "postgres").
	Name() string
	// NewDatabase returns a fresh, empty database for t, removed when t
	// ends.
	NewDatabase(t testing.TB) Database
	// Parallel bounds how many of its databases are open at once (one per
	// subtest); 0 leaves the bound to go test's -parallel flag. A harness
	// whose databases cost server connections (PostgreSQL) sets it so that
	// the drivers open at once stay under the server's limit.
	Parallel() int
}

// Database is one fresh database of a Harness.
type Database interface {
	// Open opens a read-write driver on the database, migrated but not
	// yet started (the suite calls Start), and closes it in t.Cleanup.
	// Open may be called more than once on one database: each driver is
	// another process (SQLite) or replica (PostgreSQL).
	Open(t testing.TB) tgdriver.Driver
	// OpenReadOnly opens a read-only driver on the database, which Open
	// has created and migrated, and closes it in t.Cleanup.
	OpenReadOnly(t testing.TB) tgdriver.Driver
	// Exec runs raw SQL with ? placeholders on the database, outside any
	// driver, for setup the contract needs; it fails t on an error.
	Exec(t testing.TB, query string, args ...any)
	// Query runs a query with ? placeholders on the database, outside any
	// driver, and returns its rows rendered by Render. It fails t on an
	// error.
	Query(t testing.TB, query string, args ...any) [][]string
}

// LockWatcher is implemented by the databases of drivers that run several
// write transactions at once (Info().Connections > 0): LockWaits counts
// the transactions of the database waiting for a lock now. The suite uses
// it to tell "waits" from "never waits" without timing anything.
type LockWatcher interface {
	LockWaits(t testing.TB) int
}

// TableLister is implemented by the databases of drivers that write tables
// of their own beyond the drivers' common ones (PostgreSQL's event_packs):
// the contract's dumps render them too, so that "nothing was written"
// covers every table the driver writes.
type TableLister interface {
	DriverTables() []string
}

// Run runs the driver contract as subtests of t, each on a fresh database
// of h, in parallel.
func Run(t *testing.T, h Harness) {
	if n := h.Parallel(); n > 0 {
		h = boundedHarness{Harness: h, slots: make(chan struct{}, n)}
	}
	groups := []struct {
		name  string
		tests []test
	}{
		{"Driver", driverTests},
		{"Workflow", workflowTests},
		{"Task", taskTests},
		{"Update", updateTests},
		{"Fetch", fetchTests},
		{"Apply", applyTests},
		{"Event", eventTests},
		{"Journal", journalTests},
		{"Audit", auditTests},
		{"Sweep", sweepTests},
		{"Prune", pruneTests},
		{"Alive", aliveTests},
		{"Request", requestTests},
		{"Pause", pauseTests},
		{"Concurrency", concurrencyTests},
		{"Key", keyTests},
		{"Clock", clockTests},
		{"Replicas", replicaTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, h)
				})
			}
		})
	}
}

// boundedHarness is a Harness of which at most cap(slots) databases are
// open at once (Harness.Parallel). The bound is on databases, not on
// subtests: a subtest whose clauses run as parallel subtests of their own
// (eachPath) holds no slot while they wait to run, so it cannot hold up
// the very subtests it waits for.
type boundedHarness struct {
	Harness
	slots chan struct{}
}

// NewDatabase waits for a slot, held until t's cleanups, which close the
// database's drivers and remove it, have run.
func (b boundedHarness) NewDatabase(t testing.TB) Database {
	b.slots <- struct{}{}
	t.Cleanup(func() { <-b.slots }) // registered first: runs last
	return b.Harness.NewDatabase(t)
}

// test is one clause of the contract.
type test struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// SQLDB implements Exec and Query of a Database on a database/sql handle.
type SQLDB struct {
	// DB is the handle; the harness closes it.
	DB *sql.DB
	// Dollar rewrites the ? placeholders to $1, $2, ... (PostgreSQL); the
	// suite's SQL has no ? in its quoted text.
	Dollar bool
}

func (d SQLDB) rebind(q string) string {
	if !d.Dollar {
		return q
	}
	return sqlrows.Dollar(q)
}

// Exec runs query with args and fails t on an error.
func (d SQLDB) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := d.DB.Exec(d.rebind(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Query runs query with args and returns its rows rendered by Render.
func (d SQLDB) Query(t testing.TB, query string, args ...any) [][]string {
	t.Helper()
	rows, err := sqlrows.Query(d.DB, d.rebind(query), Render, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return rows
}

// Render writes a value scanned by database/sql so that NULL, the empty
// string and zero differ: NULL is NULL, an integer is in decimal, text and
// byte strings are quoted (Go syntax).
func Render(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return strconv.Quote(string(v))
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}

// env is one started driver on a fresh database.
type env struct {
	t    *testing.T
	ctx  context.Context
	db   Database
	d    tgdriver.Driver
	info tgdriver.Info
}

// newEnv opens a driver on a fresh database of h and starts it without
// hooks.
func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	return newEnvHooks(t, h, tgdriver.Hooks{})
}

func newEnvHooks(t *testing.T, h Harness, hooks tgdriver.Hooks) *env {
	t.Helper()
	db := h.NewDatabase(t)
	d := db.Open(t)
	if err := d.Start(hooks); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return &env{t: t, ctx: testwait.Context(t), db: db, d: d, info: d.Info()}
}

// manyWriters reports whether the driver runs several write transactions
// at once.
func (e *env) manyWriters() bool { return e.info.Connections > 0 }

// write runs fn in one write transaction and fails the test on an error.
// fn runs on the driver's goroutine (SQLite's writer): it reports
// mismatches with t.Errorf or an error, never with t.Fatal.
func (e *env) write(fn func(tx tgdriver.Tx) error) {
	e.t.Helper()
	if err := e.d.Write(e.ctx, fn); err != nil {
		e.t.Fatalf("Write: %v", err)
	}
}

// insert creates the workflow of each row as needed and inserts the rows,
// in one transaction, and returns their seqs.
func (e *env) insert(rows ...tgdriver.TaskRow) []int64 {
	e.t.Helper()
	seqs := make([]int64, len(rows))
	e.write(func(tx tgdriver.Tx) error {
		for i, r := range rows {
			if _, err := tx.EnsureWorkflow(e.ctx, r.WorkflowID, 1000); err != nil {
				return fmt.Errorf("EnsureWorkflow %s: %w", r.WorkflowID, err)
			}
			seq, err := InsertTask(e.ctx, tx, r)
			if err != nil {
				return fmt.Errorf("InsertTask %s: %w", r.TaskID, err)
			}
			if err := tx.AddWorkflowTasks(e.ctx, r.WorkflowID, 1); err != nil {
				return fmt.Errorf("AddWorkflowTasks %s: %w", r.WorkflowID, err)
			}
			seqs[i] = seq
		}
		return nil
	})
	return seqs
}

// one inserts one row and returns its seq.
func (e *env) one(r tgdriver.TaskRow) int64 { return e.insert(r)[0] }

// edge records that task waits for dep.
func (e *env) edge(dep, task int64) {
	e.t.Helper()
	e.write(func(tx tgdriver.Tx) error { return InsertEdge(e.ctx, tx, dep, task) })
}

// set applies set to seq without a guard.
func (e *env) set(seq int64, set tgdriver.TaskSet) tgdriver.TaskRow {
	e.t.Helper()
	var r tgdriver.TaskRow
	e.write(func(tx tgdriver.Tx) error {
		var ok bool
		var err error
		if r, ok, err = tx.UpdateTask(e.ctx, seq, set, tgdriver.TaskGuard{}); err == nil && !ok {
			err = fmt.Errorf("unguarded update of task %d changed no row", seq)
		}
		return err
	})
	return r
}

// task reads task seq through the driver's Reads.
func (e *env) task(seq int64) tgdriver.TaskRow {
	e.t.Helper()
	r, err := e.d.Reads().TaskBySeq(e.ctx, seq)
	if err != nil {
		e.t.Fatalf("TaskBySeq %d: %v", seq, err)
	}
	return r
}

// raw reads one row of query (? placeholders) outside the driver.
func (e *env) raw(query string, args ...any) []string {
	e.t.Helper()
	rows := e.db.Query(e.t, query, args...)
	if len(rows) != 1 {
		e.t.Fatalf("%s: %d rows, want 1", query, len(rows))
	}
	return rows[0]
}

// count runs a COUNT(*) query outside the driver.
func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	n, err := strconv.Atoi(e.raw(query, args...)[0])
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// dumpTables are the tables dump renders: every table the drivers'
// methods write (and a TableLister's own), and schema_version (which
// Ready must not change).
var dumpTables = []string{"workflows", "tasks", "edges", "events", "event_links", "event_journal", "audit_chain", "audit_head",
	"pruned_workflows", "server_clock", "requests", "claim_pauses", "concurrency_keys", "schema_version"}

// dump renders every row of every table the drivers write, in a stable
// order, for "nothing was written" assertions.
func (e *env) dump() string {
	e.t.Helper()
	var b strings.Builder
	tables := dumpTables
	if l, ok := e.db.(TableLister); ok {
		tables = append(slices.Clone(dumpTables), l.DriverTables()...)
	}
	for _, table := range tables {
		rows := e.db.Query(e.t, `SELECT * FROM `+table)
		lines := make([]string, len(rows))
		for i, r := range rows {
			lines[i] = strings.Join(r, "|")
		}
		slices.Sort(lines)
		fmt.Fprintf(&b, "== %s (%d rows)\n%s\n", table, len(rows), strings.Join(lines, "\n"))
	}
	return b.String()
}

// unchanged fails the test if the database differs from before.
func (e *env) unchanged(before, what string) {
	e.t.Helper()
	if after := e.dump(); after != before {
		e.t.Fatalf("%s changed the database:\nbefore:\n%s\nafter:\n%s", what, before, after)
	}
}

// eachReads runs check with the driver's three kinds of Reads: on
// committed state (Reads), in a snapshot (Snapshot) and in a write
// transaction (Tx, rolled back after). check runs on the driver's
// goroutine for Tx: it returns what it found wrong.
func (e *env) eachReads(check func(r tgdriver.Reads) error) {
	e.t.Helper()
	if err := check(e.d.Reads()); err != nil {
		e.t.Errorf("Reads: %v", err)
	}
	if err := e.d.Snapshot(e.ctx, check); err != nil {
		e.t.Errorf("Snapshot: %v", err)
	}
	errRollback := errors.New("roll back the reading transaction")
	var found error
	err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
		found = check(tx)
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		e.t.Errorf("Tx: Write: %v", err)
	}
	if found != nil {
		e.t.Errorf("Tx: %v", found)
	}
}

// task returns a pending task of workflow wf with node id node, as a
// creation would insert it: every nullable column zero (NULL).
func task(wf, node string) tgdriver.TaskRow {
	return tgdriver.TaskRow{TaskID: wf + "." + node, WorkflowID: wf, NodeID: node, Payload: `{"node":"` + node + `"}`,
		DependsOn: `[]`, State: "pending", MaxAttempts: 3, StatusMessage: "ready", CreatedAtMS: 1000, UpdatedAtMS: 1000,
		RetryDelayMS: 1000, Kind: tgdriver.KindTask}
}

// fullTask is a task with every column set to a non-zero value.
func fullTask(wf, node string) tgdriver.TaskRow {
	r := task(wf, node)
	r.Payload, r.DependsOn = `{"a":[1,2],"s":"x"}`, `["x","y"]`
	r.State, r.Owner, r.Generation, r.TokenHash = "claimed", "worker-1", 4, []byte{0, 1, 2, 0xfe, 0xff}
	r.LeaseExpiresAtMS, r.LeaseMS, r.Attempts, r.MaxAttempts = 9000, 3000, 2, 5
	r.Result, r.HasResult, r.Error, r.StatusMessage = `{"r":1}`, true, "boom", "working"
	r.CancelCause, r.CreatedAtMS, r.UpdatedAtMS, r.CreatedBy = 77, 1111, 2222, "alice"
	r.Priority, r.Requires, r.RetryDelayMS = -7, "cuda gpu", 2500
	r.ConcurrencyKey = "llm"
	r.Kind, r.GateTimeoutMS, r.GateOnTimeout = tgdriver.KindGate, 60000, "reject"
	return r
}

// diffTask describes how got differs from want, field by field; "" when
// they are equal. A byte string's nil and empty differ (NULL and ”).
func diffTask(got, want tgdriver.TaskRow) string {
	var out []string
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		if gb, ok := g.([]byte); ok {
			wb := w.([]byte)
			if string(gb) != string(wb) || (gb == nil) != (wb == nil) {
				out = append(out, fmt.Sprintf("%s: got %s, want %s", gv.Type().Field(i).Name, bytesString(gb), bytesString(wb)))
			}
			continue
		}
		if !reflect.DeepEqual(g, w) {
			out = append(out, fmt.Sprintf("%s: got %#v, want %#v", gv.Type().Field(i).Name, g, w))
		}
	}
	return strings.Join(out, "; ")
}

func bytesString(b []byte) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", b)
}

// seqsOf returns the seqs of rows.
func seqsOf(rows []tgdriver.TaskRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.Seq
	}
	return out
}

// eq reports whether two slices hold the same elements in the same order
// (nil and empty are equal).
func eq[T comparable](a, b []T) bool { return slices.Equal(a, b) }

// InsertTask inserts one task through tx.InsertTasks and returns its seq.
func InsertTask(ctx context.Context, tx tgdriver.Tx, r tgdriver.TaskRow) (int64, error) {
	seqs, err := tx.InsertTasks(ctx, []tgdriver.TaskRow{r})
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// InsertEdge records one edge through tx.InsertEdges.
func InsertEdge(ctx context.Context, tx tgdriver.Tx, dep, task int64) error {
	return tx.InsertEdges(ctx, []tgdriver.Edge{{Dep: dep, Task: task}})
}

// LockDependency locks one node through tx.LockDependencies, or returns
// tgdriver.ErrNoRows.
func LockDependency(ctx context.Context, tx tgdriver.Tx, workflowID, nodeID string) (tgdriver.TaskRow, error) {
	rows, err := tx.LockDependencies(ctx, workflowID, []string{nodeID})
	if err != nil {
		return tgdriver.TaskRow{}, err
	}
	if len(rows) == 0 {
		return tgdriver.TaskRow{}, tgdriver.ErrNoRows
	}
	return rows[0], nil
}
