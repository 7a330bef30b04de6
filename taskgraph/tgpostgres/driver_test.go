package tgpostgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/schema"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver/drivertest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// testCtx is the context of a test's calls: it ends at the test binary's
// deadline (a hang fails the test) or when the test's cleanups run.
func testCtx(t *testing.T) context.Context { return testwait.Context(t) }

func open(t *testing.T, url string, opts Options) *Driver {
	t.Helper()
	d, err := Open(testCtx(t), url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.Start(tgdriver.Hooks{}); err != nil {
		t.Fatal(err)
	}
	return d
}

// execAll runs each of qs on conn, in order, and fails the test at the
// first that fails, naming it. ExecAll is the same for the package's
// external tests.
func execAll(t *testing.T, conn *pgx.Conn, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := conn.Exec(testCtx(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// ExecAll is execAll, for the package's external tests.
var ExecAll = execAll

// count runs q, a query of one integer, on conn and returns its value,
// failing the test if it fails. Count is the same for the package's
// external tests.
func count(t *testing.T, conn *pgx.Conn, q string) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(testCtx(t), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// Count is count, for the package's external tests.
var Count = count

// UndoTaskNodes turns a database of this package back to schema 30 (0031
// undone): a task's workflow and node unique on tasks, tasks referencing
// workflows, no task_nodes and none of its triggers.
var UndoTaskNodes = []string{
	`DROP TRIGGER tasks_nodes_insert ON tasks`, `DROP FUNCTION tasks_nodes_insert()`,
	`DROP TRIGGER workflows_delete_tasks ON workflows`, `DROP FUNCTION workflows_delete_tasks()`,
	`DROP TABLE task_nodes`,
	`ALTER TABLE tasks ADD CONSTRAINT tasks_workflow_id_node_id_key UNIQUE (workflow_id, node_id),
		ADD CONSTRAINT tasks_workflow_id_fkey FOREIGN KEY (workflow_id) REFERENCES workflows (workflow_id) ON DELETE CASCADE`,
	`UPDATE schema_version SET version = 30`,
}

// UndoEventPacks turns a database of this package back to schema 28
// (0029 undone, after UndoTaskNodes): every body in a row of events
// (UnpackBodiesSQL), no event_packs.
var UndoEventPacks = append(slices.Clone(UndoTaskNodes), UnpackBodiesSQL, `DROP TABLE event_packs`, `UPDATE schema_version SET version = 28`)

// BodiesSQL reads every event body, a row of events or an element of a
// pack, under rowBodyColumns' names, for tests that count or inspect the
// bodies wherever they are.
var BodiesSQL = `SELECT ` + rowBodyColumns + ` FROM events e UNION ALL ` + packedBodies(`event_packs p`, `true`)

// UnpackBodiesSQL moves every body of event_packs into a row of events of
// its own, unlinked (wseq NULL, no hashes), under the same id: the form
// of the bodies written before migration 0029, which the driver reads the
// same. Tests whose raw SQL addresses bodies as rows of events run it
// first.
var UnpackBodiesSQL = `WITH p AS (DELETE FROM event_packs RETURNING *)
	INSERT INTO events (event_id, workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash,
		hash_version, actor_kind, actor_name, actor_principal, task_state, content, task_seq)
	SELECT e.event_id, e.workflow_id, e.wseq, e.task_id, e.kind, e.owner, e.generation, e.at_ms, e.detail, e.prev_hash, e.hash,
		e.hash_version, e.actor_kind, e.actor_name, e.actor_principal, e.task_state, e.content, e.task_seq
	FROM (` + packedBodies(`p`, `true`) + `) e`

// raw connects to the database directly, for setup and inspection.
func raw(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(testCtx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// addTask creates node of wf (pending unless deps) and returns its seq.
func addTask(t *testing.T, d *Driver, wf, node, state string) int64 {
	t.Helper()
	var seq int64
	err := d.Write(testCtx(t), func(tx tgdriver.Tx) error {
		if _, err := tx.EnsureWorkflow(context.Background(), wf, 1000); err != nil {
			return err
		}
		var err error
		seq, err = drivertest.InsertTask(context.Background(), tx, tgdriver.TaskRow{
			TaskID: wf + "-" + node, WorkflowID: wf, NodeID: node, Payload: `{"n":1}`, DependsOn: `[]`,
			State: state, MaxAttempts: 3, CreatedAtMS: 1000, UpdatedAtMS: 1000,
		})
		if err != nil {
			return err
		}
		return tx.AddWorkflowTasks(context.Background(), wf, 1)
	})
	if err != nil {
		t.Fatalf("add task %s/%s: %v", wf, node, err)
	}
	return seq
}

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	_ = d.Close()
	open(t, url, Options{}) // the second Open finds the schema current

	url2 := pgtest.URL(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := Open(testCtx(t), url2, Options{MaxConns: 2})
			if err == nil {
				_ = d.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Open %d: %v", i, err)
		}
	}
	s, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := raw(t, url2).QueryRow(testCtx(t), `SELECT version FROM schema_version`).Scan(&v); err != nil || v != s.Latest() || v != len(s.Migrations) {
		t.Fatalf("schema version = %d, %v; want %d, the newest migration", v, err, s.Latest())
	}
}

func TestForeignAndNewerDatabasesRefused(t *testing.T) {
	url := pgtest.URL(t)
	c := raw(t, url)
	if _, err := c.Exec(testCtx(t), `CREATE TABLE invoices (id INT)`); err != nil {
		t.Fatal(err)
	}
	_, err := Open(testCtx(t), url, Options{})
	if !errors.Is(err, schema.ErrForeign) {
		t.Fatalf("Open on a foreign database: %v, want schema.ErrForeign", err)
	}
	var n int
	if err := c.QueryRow(testCtx(t), `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the foreign database has %d tables (%v), want it untouched (1)", n, err)
	}

	url2 := pgtest.URL(t)
	d := open(t, url2, Options{})
	_ = d.Close()
	if _, err := raw(t, url2).Exec(testCtx(t), `UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testCtx(t), url2, Options{}); !errors.Is(err, schema.ErrTooNew) || !strings.Contains(err.Error(), "99") {
		t.Fatalf("Open on a newer schema: %v, want schema.ErrTooNew naming version 99", err)
	}
}

func TestPasswordNeverInErrorsOrLocation(t *testing.T) {
	url := pgtest.URL(t)
	const secret = "Sup3rSecretPassw0rd"
	bad := url
	i, j := strings.Index(bad, "://")+3, strings.Index(bad, "@")
	user, _, _ := strings.Cut(bad[i:j], ":")
	bad = bad[:i] + user + ":" + secret + bad[j:]
	_, err := Open(testCtx(t), bad, Options{AcquireTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	t.Logf("Open with a wrong password: %v", err)
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error holds the password: %v", err)
	}
	// With sslmode=prefer pgx tries TLS first, which this server refuses:
	// the error leads with the server's answer to the login, not with the
	// refused TLS (issue 29 item 15).
	prefer := strings.Replace(bad, "sslmode=disable", "sslmode=prefer", 1)
	if !strings.Contains(prefer, "sslmode=prefer") {
		t.Fatalf("the test URL has no sslmode=disable to replace: %s", strings.ReplaceAll(prefer, secret, "SECRET"))
	}
	_, err = Open(testCtx(t), prefer, Options{AcquireTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	msg := err.Error()
	first, _, _ := strings.Cut(msg, "\n")
	if !strings.Contains(first, "password authentication failed") || !strings.Contains(first, "28P01") || strings.Contains(msg, secret) {
		t.Fatalf("Open with a wrong password, sslmode=prefer: the first line does not name the refused password:\n%s", msg)
	}
	if _, err := Open(testCtx(t), "mysql://u:"+secret+"@h/db", Options{}); !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), secret) {
		t.Fatalf("Open with another scheme: %v", err)
	}
	for _, u := range []string{"postgres://u:" + secret + "@127.0.0.1:notaport/db", "postgres://u@127.0.0.1:1/db?password=" + secret + "&connect_timeout=x"} {
		if _, err := Open(testCtx(t), u, Options{AcquireTimeout: time.Second}); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q) = %v, want an error without the password", strings.ReplaceAll(u, secret, "SECRET"), err)
		}
	}
	if loc, pw, err := parseURL("postgres://u@h/db?password=" + secret + "&sslmode=disable"); err != nil || pw != secret || strings.Contains(loc, secret) {
		t.Errorf("parseURL with a password parameter: %q %v", loc, err)
	}
	alt := strings.Replace(url, "postgres://", "postgresql://", 1)
	d := open(t, alt, Options{})
	loc := d.Info().Location
	if _, pw, _ := parseURL(url); pw != "" && strings.Contains(loc, pw) {
		t.Fatalf("Info().Location holds the password: %s", loc)
	}
	if d.Info().Name != "postgres" {
		t.Fatalf("Info = %+v", d.Info())
	}
	if _, shared := any(d).(tgdriver.SharedClock); !shared {
		t.Fatal("the PostgreSQL driver is not a SharedClock: replicas would judge leases by their own clocks")
	}
}

// waitForLockWait polls until some backend of the database waits for a lock.
func waitForLockWait(t *testing.T, d *Driver) {
	t.Helper()
	ctx := testCtx(t)
	testwait.For(t, "a transaction to wait for a lock", func() bool {
		var n int
		if err := d.pool.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

// TestLockDependencyHoldsOffCompletion: a create holding its dependency FOR
// SHARE makes a concurrent completion's UPDATE wait; the completion then sees
// the new edge and decrements the new dependent.
func TestLockDependencyHoldsOffCompletion(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	dep := addTask(t, d, "wf", "dep", "pending")
	locked, release := make(chan struct{}), make(chan struct{})
	create := make(chan error, 1)
	go func() {
		create <- d.Write(ctx, func(tx tgdriver.Tx) error {
			r, err := drivertest.LockDependency(ctx, tx, "wf", "dep")
			if err != nil || r.State != "pending" {
				return fmt.Errorf("LockDependency: %+v %v", r, err)
			}
			seq, err := drivertest.InsertTask(ctx, tx, tgdriver.TaskRow{TaskID: "wf-child", WorkflowID: "wf", NodeID: "child", Payload: `{}`,
				DependsOn: `["dep"]`, State: "blocked", MaxAttempts: 1, Unmet: 1, CreatedAtMS: 2, UpdatedAtMS: 2})
			if err != nil {
				return err
			}
			if err := drivertest.InsertEdge(ctx, tx, dep, seq); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	complete := make(chan []tgdriver.Dependent, 1)
	completeErr := make(chan error, 1)
	go func() {
		completeErr <- d.Write(ctx, func(tx tgdriver.Tx) error {
			if _, ok, err := tx.UpdateTask(ctx, dep, tgdriver.TaskSet{State: tgdriver.Val("completed"), UpdatedAtMS: 3},
				tgdriver.TaskGuard{States: []string{"pending", "claimed"}}); err != nil || !ok {
				return fmt.Errorf("complete: %v %v", ok, err)
			}
			rows, err := tx.DecrementUnmet(ctx, []int64{dep})
			complete <- rows
			return err
		})
	}()
	waitForLockWait(t, d)
	select {
	case err := <-completeErr:
		t.Fatalf("the completion did not wait for the create: %v", err)
	default:
	}
	close(release)
	if err := <-create; err != nil {
		t.Fatal(err)
	}
	if err := <-completeErr; err != nil {
		t.Fatal(err)
	}
	rows := <-complete
	if len(rows) != 1 || rows[0].Row.Unmet != 0 || rows[0].Row.State != "blocked" {
		t.Fatalf("DecrementUnmet after the create = %+v, want the child at unmet 0", rows)
	}
}

func TestNotifyReachesOtherReplicaOnly(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	a := open(t, url, Options{ReplicaID: "replica-a"})
	b := open(t, url, Options{ReplicaID: "replica-b"})
	notify := func(d *Driver, wf string) {
		t.Helper()
		if err := d.Write(ctx, func(tx tgdriver.Tx) error { return tx.NotifyReady(ctx, wf, "") }); err != nil {
			t.Fatal(err)
		}
	}
	notify(a, "wf-from-a")
	select {
	case c := <-b.Changes():
		if len(c.Workflows) != 1 || c.Workflows[0] != "wf-from-a" || c.Unknown {
			t.Fatalf("b got %+v", c)
		}
	case <-ctx.Done():
		t.Fatal("b never heard a's notification")
	}
	notify(b, "wf-from-b")
	select {
	case c := <-a.Changes():
		if len(c.Workflows) != 1 || c.Workflows[0] != "wf-from-b" {
			t.Fatalf("a got %+v, want only b's notification (never its own)", c)
		}
	case <-ctx.Done():
		t.Fatal("a never heard b's notification")
	}
	select {
	case c := <-b.Changes():
		t.Fatalf("b heard its own notification: %+v", c)
	default:
	}
	// A rolled-back write notifies nobody.
	_ = a.Write(ctx, func(tx tgdriver.Tx) error {
		_ = tx.NotifyReady(ctx, "rolled-back", "")
		return errors.New("roll back")
	})
	notify(a, "after")
	c := <-b.Changes()
	for _, w := range c.Workflows {
		if w == "rolled-back" {
			t.Fatalf("b heard a rolled-back notification: %+v", c)
		}
	}
}

func TestListenerReconnectReportsUnknown(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{ReplicaID: "listener"})
	c := raw(t, url)
	if _, err := c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`); err != nil {
		t.Fatal(err)
	}
	select {
	case ch := <-d.Changes():
		if !ch.Unknown {
			t.Fatalf("after a reconnect: %+v, want Unknown", ch)
		}
	case <-ctx.Done():
		t.Fatal("no Unknown change after the listener lost its connection")
	}
}

// TestWriteRetriesDeadlock provokes a deadlock with two writes locking two
// rows in opposite orders; PostgreSQL aborts one, Write runs it again, and
// both succeed.
func TestWriteRetriesDeadlock(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	addTask(t, d, "x", "a", "pending")
	addTask(t, d, "y", "a", "pending")
	var runs atomic.Int32
	var barrier sync.WaitGroup
	barrier.Add(2)
	write := func(first, second string) error {
		var once sync.Once
		return d.Write(ctx, func(tx tgdriver.Tx) error {
			runs.Add(1)
			ptx := tx.(*wtx).c
			if _, err := ptx.Exec(ctx, `UPDATE workflows SET task_count = task_count WHERE workflow_id = $1`, first); err != nil {
				return err
			}
			once.Do(func() { barrier.Done(); barrier.Wait() })
			_, err := ptx.Exec(ctx, `UPDATE workflows SET task_count = task_count WHERE workflow_id = $1`, second)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- write("x", "y") }()
	go func() { errs <- write("y", "x") }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a write failed: %v", err)
		}
	}
	if n := runs.Load(); n < 3 {
		t.Fatalf("the functions ran %d times; a deadlock should have made one run again", n)
	}
}

func TestWriteRetriesSerializationFailure(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	var runs int
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		runs++
		if runs == 1 {
			_, err := tx.(*wtx).c.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'provoked' USING ERRCODE = '40001'; END $$`)
			return err
		}
		return nil
	})
	if err != nil || runs != 2 {
		t.Fatalf("Write = %v after %d runs, want success after 2", err, runs)
	}
	runs = 0
	err = d.Write(ctx, func(tx tgdriver.Tx) error {
		runs++
		_, err := tx.(*wtx).c.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'provoked' USING ERRCODE = '40P01'; END $$`)
		return err
	})
	if err == nil || runs != MaxWriteTries {
		t.Fatalf("Write = %v after %d runs, want failure after %d", err, runs, MaxWriteTries)
	}
}

func TestErrorsMapToSentinels(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	for code, want := range map[string]error{"53100": tgdriver.ErrDiskFull, "25006": tgdriver.ErrReadOnly, "57P01": tgdriver.ErrUnreachable} {
		err := d.Write(ctx, func(tx tgdriver.Tx) error {
			_, err := tx.(*wtx).c.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'provoked' USING ERRCODE = '`+code+`'; END $$`)
			return d.classify(ctx, err)
		})
		if !errors.Is(err, want) || !errors.Is(err, tgdriver.ErrUnavailable) {
			t.Errorf("SQLSTATE %s: %v, want %v", code, err, want)
		}
	}
	if _, err := d.Reads().TaskByID(ctx, "none"); !errors.Is(err, tgdriver.ErrNoRows) {
		t.Errorf("TaskByID of nothing: %v", err)
	}
}

func TestBusyPoolIsErrBusy(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{MaxConns: 1, AcquireTimeout: 100 * time.Millisecond})
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- d.Write(ctx, func(tx tgdriver.Tx) error { close(held); <-release; return nil })
	}()
	<-held
	err := d.Write(ctx, func(tx tgdriver.Tx) error { return nil })
	close(release)
	if !errors.Is(err, tgdriver.ErrBusy) {
		t.Fatalf("Write on a full pool: %v, want ErrBusy", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestClockFollowsDatabaseDespiteSkew(t *testing.T) {
	for _, skew := range []time.Duration{5 * time.Second, -5 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			url := pgtest.URL(t)
			// The manual clock stands still from here, so the offset the
			// driver measures is off by the time Open takes before it
			// calibrates: the bounds below grow with that time, measured,
			// rather than assume Open is quick on a loaded machine.
			start := time.Now()
			local := lease.NewManualClock(start.Add(skew))
			d := open(t, url, Options{LocalClock: local})
			opened := time.Since(start)
			var db time.Time
			if err := d.pool.QueryRow(testCtx(t), `SELECT clock_timestamp()`).Scan(&db); err != nil {
				t.Fatal(err)
			}
			// The manual clock stands still: the corrected reading is the
			// database's time at calibration, shortly before db.
			got := d.Clock().Now()
			if diff := db.Sub(got); diff < 0 || diff > 2*time.Second+opened {
				t.Fatalf("Clock().Now() = %v, database %v (diff %v); want within 2s (plus Open's %v) despite a %v local skew", got, db, diff, opened, skew)
			}
			local.Advance(time.Minute)
			if moved := d.Clock().Now().Sub(got); moved != time.Minute {
				t.Fatalf("the clock moved %v when the local clock advanced a minute", moved)
			}
			// The offset undoes the skew, plus the part of Open's time that
			// passed before calibration (at most opened).
			if off, _ := d.clock.Offset(); off+skew < -time.Second || off+skew > opened+time.Second {
				t.Fatalf("offset %v for a local skew of %v (Open took %v)", off, skew, opened)
			}
		})
	}
}

func TestCloseReadyPingSnapshot(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	if err := d.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	addTask(t, d, "wf", "a", "pending")
	if err := d.Snapshot(ctx, func(r tgdriver.Reads) error {
		ts, err := r.ListTasks(ctx, tgdriver.ListFilter{WorkflowID: "wf"})
		if err != nil || len(ts) != 1 || ts[0].Payload != `{"n":1}` {
			return fmt.Errorf("ListTasks = %+v, %v", ts, err)
		}
		wfs, err := r.PendingWorkflows(ctx, 10)
		if err != nil || len(wfs) != 1 || wfs[0] != "wf" {
			return fmt.Errorf("PendingWorkflows = %v, %v", wfs, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := d.Write(ctx, func(tgdriver.Tx) error { return nil }); !errors.Is(err, tgdriver.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if err := d.Ready(ctx); !errors.Is(err, tgdriver.ErrClosed) {
		t.Fatalf("Ready after Close: %v", err)
	}
}

func TestWriteRetriesUniqueViolationAndReportsBatches(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	var mu sync.Mutex
	var sizes []int
	var failed int
	if err := d.Start(tgdriver.Hooks{
		BatchStart: func(context.Context, tgdriver.Tx) (func(), error) {
			t.Error("BatchStart called on a SharedClock driver")
			return nil, nil
		},
		OnBatch: func(size int, _ time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			sizes = append(sizes, size)
			if err != nil {
				failed++
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	// Two creates of one node race: the loser's INSERT waits for the
	// winner, fails with 23505, and its rerun finds the node.
	addTask(t, d, "wf", "seed", "pending")
	held, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- d.Write(ctx, func(tx tgdriver.Tx) error {
			_, err := drivertest.InsertTask(ctx, tx, tgdriver.TaskRow{TaskID: "wf-x", WorkflowID: "wf", NodeID: "x", Payload: `{}`, DependsOn: `[]`,
				State: "pending", MaxAttempts: 1, CreatedAtMS: 1, UpdatedAtMS: 1})
			close(held)
			<-release
			return err
		})
	}()
	<-held
	var runs int
	second := make(chan error, 1)
	go func() {
		second <- d.Write(ctx, func(tx tgdriver.Tx) error {
			runs++
			if _, err := tx.TaskByNode(ctx, "wf", "x"); err == nil {
				return nil // the rerun sees the winner's node
			} else if !errors.Is(err, tgdriver.ErrNoRows) {
				return err
			}
			_, err := drivertest.InsertTask(ctx, tx, tgdriver.TaskRow{TaskID: "wf-x", WorkflowID: "wf", NodeID: "x", Payload: `{}`, DependsOn: `[]`,
				State: "pending", MaxAttempts: 1, CreatedAtMS: 1, UpdatedAtMS: 1})
			return err
		})
	}()
	waitForLockWait(t, d)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil || runs != 2 {
		t.Fatalf("the losing create: %v after %d runs, want success after 2", err, runs)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range sizes {
		if s != 1 {
			t.Fatalf("OnBatch sizes %v, want all 1", sizes)
		}
	}
	if len(sizes) != 4 || failed != 1 {
		t.Fatalf("OnBatch called %d times with %d failures, want 4 with 1 (seed, winner, loser twice)", len(sizes), failed)
	}
}

func TestClockRecalibrates(t *testing.T) {
	start := time.Now()
	local := lease.NewManualClock(start)
	d := open(t, pgtest.URL(t), Options{LocalClock: local, CalibrateInterval: 20 * time.Millisecond})
	local.Step(-30 * time.Second) // the local clock is stepped back
	testwait.For(t, "the offset to follow the local clock's step", func() bool {
		// The manual local clock stands still while the database's runs:
		// the right offset is the step plus the real time since start (a
		// slow start on a loaded machine once pushed that past the bound).
		want := 30*time.Second + time.Since(start)
		off, _ := d.clock.Offset()
		return (off - want).Abs() < 2*time.Second
	})
	if diff := time.Since(d.Clock().Now()).Abs(); diff > 2*time.Second {
		t.Fatalf("after the step the clock is %v off the database's", diff)
	}
}

// TestWithoutListenFallsBackToPolling: a database that rejects LISTEN (as a
// distributed engine does) gets a poll, and NotifyReady stops calling
// pg_notify there.
func TestWithoutListenFallsBackToPolling(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{WatchInterval: 10 * time.Millisecond, listenSQL: `LISTEN_IS_NOT_SUPPORTED_HERE`})
	if !d.noNotify.Load() {
		t.Fatal("LISTEN failed with a syntax error but the driver did not fall back")
	}
	other := open(t, url, Options{})
	addTask(t, other, "wf", "a", "pending")
	select {
	case c := <-d.Changes():
		if !c.Unknown {
			t.Fatalf("poll change = %+v, want Unknown", c)
		}
	case <-ctx.Done():
		t.Fatal("the poll never reported the pending task")
	}
	if err := d.Write(ctx, func(tx tgdriver.Tx) error { return tx.NotifyReady(ctx, "wf", "") }); err != nil {
		t.Fatal(err)
	}
}

func TestUnreachableServer(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	// A port nothing listens on: the server is unreachable.
	i := strings.LastIndex(url, ":")
	j := i + strings.IndexAny(url[i:], "/")
	dead := url[:i] + ":1" + url[j:]
	if _, err := Open(ctx, dead, Options{AcquireTimeout: 2 * time.Second}); !errors.Is(err, tgdriver.ErrUnreachable) {
		t.Fatalf("Open on a closed port: %v, want ErrUnreachable", err)
	}
	// A connection dropped in the middle of a write.
	d := open(t, url, Options{})
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		_, err := tx.(*wtx).c.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
		return d.classify(ctx, err)
	})
	if !errors.Is(err, tgdriver.ErrUnreachable) {
		t.Fatalf("Write whose connection was terminated: %v, want ErrUnreachable", err)
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping after a dropped connection: %v (the pool should replace it)", err)
	}
	_ = d.Close()
	if _, err := d.Reads().TaskByID(ctx, "x"); !errors.Is(err, tgdriver.ErrClosed) {
		t.Fatalf("a read after Close: %v, want ErrClosed", err)
	}
}

// TestManyClaimersEachTaskOnce: claimers on two drivers (replicas) take
// tasks by NextPending while other writers lock whole workflows; every task
// is claimed exactly once, every chain stays gapless, and no write fails
// (deadlocks, if any, are retried).
func TestManyClaimersEachTaskOnce(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	ds := []*Driver{open(t, url, Options{MaxConns: 6}), open(t, url, Options{MaxConns: 6})}
	const workflows, perWorkflow = 4, 15
	for w := range workflows {
		for n := range perWorkflow {
			addTask(t, ds[0], fmt.Sprintf("wf%d", w), fmt.Sprintf("n%d", n), "pending")
		}
	}
	var mu sync.Mutex
	claimed := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	appendEvent := func(tx tgdriver.Tx, wf, task string) error {
		head, n, err := tx.ChainHead(ctx, wf)
		if err != nil {
			return err
		}
		return tx.AppendEvents(ctx, []tgdriver.EventRow{tgdriver.EventRow{WorkflowID: wf, Seq: n + 1, TaskID: task, Kind: "claimed", AtMS: 5,
			Detail: `{}`, PrevHash: head, Hash: fmt.Sprintf("%s-%d", wf, n+1)}})
	}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := ds[i%2]
			for {
				var got int64
				err := d.Write(ctx, func(tx tgdriver.Tx) error {
					got = 0
					r, ok, err := tx.NextPending(ctx, "", nil)
					if err != nil {
						return err
					}
					if !ok {
						// Every pending task is held by another claimer
						// (skipped), or none is left.
						n, err := tx.CountByState(ctx)
						if err == nil && n["pending"] > 0 {
							got = -1
						}
						return err
					}
					if _, ok, err := tx.UpdateTask(ctx, r.Seq, tgdriver.TaskSet{State: tgdriver.Val("claimed"), UpdatedAtMS: 5},
						tgdriver.TaskGuard{States: []string{"pending"}}); err != nil || !ok {
						return fmt.Errorf("claim %d: ok %v, %v", r.Seq, ok, err)
					}
					got = r.Seq
					return appendEvent(tx, r.WorkflowID, r.TaskID)
				})
				if err != nil {
					errs <- err
					return
				}
				if got == 0 {
					return
				}
				if got < 0 {
					time.Sleep(time.Millisecond) // back off: the holders commit
					continue
				}
				mu.Lock()
				claimed[got]++
				mu.Unlock()
			}
		}()
	}
	// Workflow-wide writers meanwhile: lock a workflow, then touch its
	// unfinished tasks (as cancel does), in lock order.
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 20 {
				wf := fmt.Sprintf("wf%d", (i+k)%workflows)
				err := ds[i].Write(ctx, func(tx tgdriver.Tx) error {
					if _, err := tx.LockWorkflow(ctx, wf); err != nil {
						return err
					}
					seqs, err := tx.UnfinishedInWorkflow(ctx, wf)
					if err != nil {
						return err
					}
					for _, s := range seqs {
						if _, _, err := tx.UpdateTask(ctx, s, tgdriver.TaskSet{StatusMessage: tgdriver.Val("seen"), UpdatedAtMS: 6}, tgdriver.TaskGuard{}); err != nil {
							return err
						}
					}
					return appendEvent(tx, wf, "op")
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(claimed) != workflows*perWorkflow {
		t.Fatalf("%d tasks claimed, want %d", len(claimed), workflows*perWorkflow)
	}
	for seq, n := range claimed {
		if n != 1 {
			t.Errorf("task %d claimed %d times", seq, n)
		}
	}
	for w := range workflows {
		var want int64 = 1
		if err := ds[0].Reads().WorkflowEvents(ctx, fmt.Sprintf("wf%d", w), func(e tgdriver.EventRow) error {
			if e.Seq != want {
				return fmt.Errorf("event %d where %d was due", e.Seq, want)
			}
			want++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadOnlyDatabase: a database whose transactions are read-only (as on
// a standby) fails Ready and writes with ErrReadOnly, and still answers Ping.
func TestReadOnlyDatabase(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	var name string
	if err := d.pool.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := raw(t, url).Exec(ctx, `ALTER DATABASE `+name+` SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	d.pool.Reset() // new connections pick the setting up
	if err := d.Ready(ctx); !errors.Is(err, tgdriver.ErrReadOnly) {
		t.Fatalf("Ready on a read-only database: %v, want ErrReadOnly", err)
	}
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		_, err := tx.EnsureWorkflow(ctx, "wf", 1)
		return err
	})
	if !errors.Is(err, tgdriver.ErrReadOnly) {
		t.Fatalf("Write on a read-only database: %v, want ErrReadOnly", err)
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping on a read-only database: %v", err)
	}
	ctx0, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Ready(ctx0); err == nil {
		t.Fatal("Ready with a cancelled context succeeded")
	}
}
