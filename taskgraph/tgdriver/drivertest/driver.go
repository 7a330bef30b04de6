package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// driverTests: Driver's own methods.
var driverTests = []test{
	{"Info", testInfo},
	{"StartHooks", testStartHooks},
	{"WriteCommitsAllOrNothing", testWriteAllOrNothing},
	{"ReadsSeeCommittedStateOnly", testReadsCommittedOnly},
	{"Snapshot", testSnapshot},
	{"ReadyAndPing", testReadyPing},
	{"Close", testClose},
	{"ReadOnly", testReadOnly},
	{"Changes", testChanges},
}

func testInfo(t *testing.T, h Harness) {
	e := newEnv(t, h)
	if e.info.Name != h.Name() {
		t.Errorf("Info().Name = %q, want %q", e.info.Name, h.Name())
	}
	if e.info.Location == "" {
		t.Error("Info().Location is empty; it names the database for logs and errors")
	}
	if e.info.ReadOnly {
		t.Error("a driver opened read-write says ReadOnly")
	}
	if e.info.Connections < 0 {
		t.Errorf("Info().Connections = %d", e.info.Connections)
	}
}

// testStartHooks: BatchStart runs inside every write transaction before its
// operation, and its after function once it committed, unless the driver
// has a shared clock (then never); OnBatch is called before Write returns.
func testStartHooks(t *testing.T, h Harness) {
	var starts, afters, batches atomic.Int64
	var afterErr atomic.Value // what the after function found wrong, outside the transaction
	var drv tgdriver.Driver
	rctx := testwait.Context(t) // the after function's, which runs once the transaction is over
	hooks := tgdriver.Hooks{
		BatchStart: func(ctx context.Context, tx tgdriver.Tx) (func(), error) {
			n := starts.Add(1)
			if err := tx.TouchAlive(ctx, 4000+n); err != nil {
				return nil, err
			}
			if _, err := tx.EnsureWorkflow(ctx, "hook", 4000+n); err != nil {
				return nil, err
			}
			return func() {
				afters.Add(1)
				if _, err := drv.Reads().Workflow(rctx, "hook"); err != nil {
					afterErr.Store(fmt.Errorf("after read BatchStart's workflow outside the transaction: %w", err))
				}
			}, nil
		},
		OnBatch: func(size int, _ time.Duration, err error) {
			if size < 1 {
				t.Errorf("OnBatch size %d", size)
			}
			if err == nil {
				batches.Add(1)
			}
		},
	}
	e := newEnvHooks(t, h, hooks)
	drv = e.d
	var alive int64
	var found bool
	e.write(func(tx tgdriver.Tx) error {
		var err error
		alive, found, err = tx.ReadAlive(e.ctx)
		return err
	})
	if batches.Load() < 1 {
		t.Error("Write returned before OnBatch was called for its commit")
	}
	if _, shared := e.d.(tgdriver.SharedClock); shared {
		if starts.Load() != 0 || afters.Load() != 0 {
			t.Fatalf("BatchStart ran %d times (after %d) on a driver with a shared clock, which never calls it", starts.Load(), afters.Load())
		}
		return
	}
	if starts.Load() != 1 || !found || alive != 4001 {
		t.Fatalf("BatchStart ran %d times; the operation read alive %d (found %v), want it to see BatchStart's write 4001", starts.Load(), alive, found)
	}
	if afters.Load() != 1 {
		t.Fatalf("after ran %d times, want once after the commit", afters.Load())
	}
	if err, _ := afterErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	// A failed operation: its after never runs for a transaction that did
	// not commit.
	boom := errors.New("refused")
	before := afters.Load()
	if err := e.d.Write(e.ctx, func(tgdriver.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing Write: %v, want %v", err, boom)
	}
	if afters.Load() != before {
		t.Fatal("after ran for a transaction that rolled back")
	}
}

// testWriteAllOrNothing: a Write that returned nil is committed (another
// connection sees it at once); one whose function failed left nothing,
// and returns that function's error.
func testWriteAllOrNothing(t *testing.T, h Harness) {
	e := newEnv(t, h)
	seq := e.one(task("wf", "a"))
	if n := e.count(`SELECT COUNT(*) FROM tasks WHERE seq = ?`, seq); n != 1 {
		t.Fatalf("a committed task is not in the database (%d rows)", n)
	}
	before := e.dump()
	boom := errors.New("the operation failed")
	err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
		if _, err := tx.EnsureWorkflow(e.ctx, "wf2", 5); err != nil {
			return err
		}
		if _, err := InsertTask(e.ctx, tx, task("wf2", "b")); err != nil {
			return err
		}
		if _, _, err := tx.UpdateTask(e.ctx, seq, tgdriver.TaskSet{State: tgdriver.Val("completed"), UpdatedAtMS: 5}, tgdriver.TaskGuard{}); err != nil {
			return err
		}
		if err := tx.TouchAlive(e.ctx, 5); err != nil {
			return err
		}
		if err := tx.JournalEvents(e.ctx, []tgdriver.EventRow{ev("wf", 0, "", "")}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write: %v, want the function's error", err)
	}
	e.unchanged(before, "a Write whose function failed")
}

// testReadsCommittedOnly: Reads outside the transaction do not see what it
// has not committed; the transaction's own reads do.
func testReadsCommittedOnly(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.write(func(tx tgdriver.Tx) error {
		if _, err := tx.EnsureWorkflow(e.ctx, "wf", 1); err != nil {
			return err
		}
		seq, err := InsertTask(e.ctx, tx, task("wf", "a"))
		if err != nil {
			return err
		}
		if _, err := tx.TaskBySeq(e.ctx, seq); err != nil {
			t.Errorf("the transaction does not read its own task: %v", err)
		}
		if _, err := e.d.Reads().TaskByID(e.ctx, "wf.a"); !errors.Is(err, tgdriver.ErrNoRows) {
			t.Errorf("Reads saw a task not yet committed: %v, want ErrNoRows", err)
		}
		if _, err := e.d.Reads().Workflow(e.ctx, "wf"); !errors.Is(err, tgdriver.ErrNoRows) {
			t.Errorf("Reads saw a workflow not yet committed: %v, want ErrNoRows", err)
		}
		return nil
	})
	if _, err := e.d.Reads().TaskByID(e.ctx, "wf.a"); err != nil {
		t.Fatalf("after the commit: %v", err)
	}
}

// testSnapshot: every read of a Snapshot sees one state, whatever commits
// meanwhile; Snapshot returns fn's error.
func testSnapshot(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.one(task("wf", "a"))
	err := e.d.Snapshot(e.ctx, func(r tgdriver.Reads) error {
		ts, err := r.ListTasks(e.ctx, tgdriver.ListFilter{})
		if err != nil || len(ts) != 1 {
			return fmt.Errorf("first read: %d tasks, %v; want 1", len(ts), err)
		}
		e.one(task("wf", "b"))
		ts, err = r.ListTasks(e.ctx, tgdriver.ListFilter{})
		if err != nil || len(ts) != 1 {
			return fmt.Errorf("a read after another commit: %d tasks, %v; want the snapshot's 1", len(ts), err)
		}
		w, err := r.Workflow(e.ctx, "wf")
		if err != nil || w.TaskCount != 1 {
			return fmt.Errorf("workflow in the snapshot: %+v, %v; want 1 task", w, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := e.d.Reads().ListTasks(e.ctx, tgdriver.ListFilter{}); err != nil || len(ts) != 2 {
		t.Fatalf("after the snapshot: %d tasks, %v; want 2", len(ts), err)
	}
	boom := errors.New("fn failed")
	if err := e.d.Snapshot(e.ctx, func(tgdriver.Reads) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Snapshot: %v, want fn's error", err)
	}
}

// testReadyPing: Ready and Ping answer nil on a working database, and Ready
// changes nothing.
func testReadyPing(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.one(task("wf", "a"))
	before := e.dump()
	for range 2 {
		if err := e.d.Ready(e.ctx); err != nil {
			t.Fatalf("Ready: %v", err)
		}
	}
	if err := e.d.Ping(e.ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	e.unchanged(before, "Ready")
}

// testClose: Close is idempotent, and afterwards Write (which never runs
// its function), Ready, Ping and Snapshot answer ErrClosed.
func testClose(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.one(task("wf", "a"))
	if err := e.d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ran := false
	if err := e.d.Write(e.ctx, func(tgdriver.Tx) error { ran = true; return nil }); !errors.Is(err, tgdriver.ErrClosed) || ran {
		t.Fatalf("Write after Close: %v (ran %v), want ErrClosed without running", err, ran)
	}
	if err := e.d.Ready(e.ctx); !errors.Is(err, tgdriver.ErrClosed) {
		t.Fatalf("Ready after Close: %v, want ErrClosed", err)
	}
	if err := e.d.Ping(e.ctx); !errors.Is(err, tgdriver.ErrClosed) {
		t.Fatalf("Ping after Close: %v, want ErrClosed", err)
	}
	if err := e.d.Snapshot(e.ctx, func(tgdriver.Reads) error { return nil }); !errors.Is(err, tgdriver.ErrClosed) {
		t.Fatalf("Snapshot after Close: %v, want ErrClosed", err)
	}
	// What was committed before Close stays.
	if n := e.count(`SELECT COUNT(*) FROM tasks`); n != 1 {
		t.Fatalf("%d tasks after Close, want 1", n)
	}
}

// testReadOnly: a read-only driver says so, refuses every Write with
// ErrReadOnlyStore without running it, reads, and is not Ready (an error
// matching ErrReadOnly, an ErrUnavailable); nothing changes.
func testReadOnly(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.one(task("wf", "a"))
	ro := e.db.OpenReadOnly(t)
	if err := ro.Start(tgdriver.Hooks{}); err != nil {
		t.Fatalf("Start of a read-only driver: %v", err)
	}
	before := e.dump()
	if info := ro.Info(); !info.ReadOnly || info.Name != h.Name() {
		t.Errorf("read-only Info %+v", info)
	}
	ran := false
	if err := ro.Write(e.ctx, func(tgdriver.Tx) error { ran = true; return nil }); !errors.Is(err, tgdriver.ErrReadOnlyStore) || ran {
		t.Errorf("read-only Write: %v (ran %v), want ErrReadOnlyStore without running", err, ran)
	}
	if r, err := ro.Reads().TaskByID(e.ctx, "wf.a"); err != nil || r.NodeID != "a" {
		t.Errorf("read-only read: %+v %v", r, err)
	}
	if err := ro.Snapshot(e.ctx, func(r tgdriver.Reads) error {
		_, err := r.Workflow(e.ctx, "wf")
		return err
	}); err != nil {
		t.Errorf("read-only Snapshot: %v", err)
	}
	if err := ro.Ping(e.ctx); err != nil {
		t.Errorf("read-only Ping: %v", err)
	}
	// Ready answers nil, ErrUnavailable or ErrClosed; a driver that cannot
	// write answers as a database that cannot be written.
	if err := ro.Ready(e.ctx); !errors.Is(err, tgdriver.ErrReadOnly) {
		t.Errorf("read-only Ready: %v, want an error matching ErrReadOnly (an ErrUnavailable)", err)
	}
	e.unchanged(before, "a read-only driver")
	if err := ro.Close(); err != nil {
		t.Errorf("read-only Close: %v", err)
	}
}

// testChanges: a driver hears, on Changes, that another process or replica
// committed a write that made a task claimable (NotifyReady, Apply.Ready):
// either the workflow (with its requires, when the driver lists them) or
// Unknown. Changes may coalesce, and Unknown says nothing of when it was
// seen, so the clause is met over three writes in turn: a driver that
// never reported the other's commits would fail it.
func testChanges(t *testing.T, h Harness) {
	e := newEnv(t, h)
	other := e.db.Open(t)
	if err := other.Start(tgdriver.Hooks{}); err != nil {
		t.Fatal(err)
	}
	ch := e.d.Changes()
	if ch == nil {
		t.Fatal("Changes() is nil on a read-write driver, which can see other writers")
	}
	heard := func(wf, requires string) {
		t.Helper()
		for {
			c, open := testwait.RecvOK(t, "a change naming "+wf+" (or Unknown) after another driver's commit", ch)
			if !open {
				t.Fatalf("Changes closed before a change naming %s (or Unknown)", wf)
			}
			if c.Requires != nil && len(c.Requires) != len(c.Workflows) {
				t.Fatalf("change %+v: Requires does not parallel Workflows", c)
			}
			if c.Unknown {
				return
			}
			if i := slices.Index(c.Workflows, wf); i >= 0 {
				if c.Requires != nil && c.Requires[i] != requires {
					t.Fatalf("change %+v: %s requires %q, want %q", c, wf, c.Requires[i], requires)
				}
				return
			}
		}
	}
	for _, c := range []struct {
		wf, requires string
		apply        bool
	}{{"wf1", "cuda gpu", false}, {"wf2", "", true}, {"wf3", "", false}} {
		for drained := false; !drained; {
			select {
			case <-ch:
			default:
				drained = true
			}
		}
		if err := other.Write(e.ctx, func(tx tgdriver.Tx) error {
			if _, err := tx.EnsureWorkflow(e.ctx, c.wf, 1); err != nil {
				return err
			}
			if _, err := InsertTask(e.ctx, tx, task(c.wf, "a")); err != nil {
				return err
			}
			if c.apply {
				err := tx.Apply(e.ctx, tgdriver.Apply{Ready: []tgdriver.Ready{{WorkflowID: c.wf, Requires: c.requires}}})
				return err
			}
			return tx.NotifyReady(e.ctx, c.wf, c.requires)
		}); err != nil {
			t.Fatal(err)
		}
		heard(c.wf, c.requires)
	}
}

// blocking runs fn in a write transaction of its own on a goroutine and
// keeps that transaction open after fn: it returns once fn ran, with a
// function that lets the transaction commit and returns its error (also
// called in t.Cleanup).
func blocking(t *testing.T, e *env, fn func(tx tgdriver.Tx) error) (release func() error) {
	t.Helper()
	held, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
			err := fn(tx)
			select {
			case <-held: // a rerun (a retried transaction)
			default:
				close(held)
			}
			if err != nil {
				return err
			}
			<-gate
			return nil
		})
	}()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the holding transaction ended early: %v", err)
	}
	var once sync.Once
	var err error
	release = func() error {
		once.Do(func() {
			close(gate)
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = release() })
	return release
}
