package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver/drivertest"
)

func TestPragmas(t *testing.T) {
	for mode, want := range map[SyncMode]int{SyncFull: 2, SyncNormal: 1} {
		t.Run(string(mode), func(t *testing.T) {
			d := openTest(t, Options{Sync: mode}, tgdriver.Hooks{})
			var jm string
			var fk, syn int
			err := d.writerConn(context.Background(), func(c *sql.Conn) error {
				ctx := context.Background()
				if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&jm); err != nil {
					return err
				}
				if err := c.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
					return err
				}
				return c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&syn)
			})
			if err != nil {
				t.Fatal(err)
			}
			if jm != "wal" || fk != 1 || syn != want {
				t.Fatalf("writer: journal_mode %q foreign_keys %d synchronous %d; want wal, 1, %d", jm, fk, syn, want)
			}
			if err := d.rdb.QueryRow(`PRAGMA journal_mode`).Scan(&jm); err != nil || jm != "wal" {
				t.Fatalf("read pool journal_mode %q (%v), want wal", jm, err)
			}
			if err := d.rdb.QueryRow(`PRAGMA query_only`).Scan(&fk); err != nil || fk != 1 {
				t.Fatalf("read pool query_only %d (%v), want 1", fk, err)
			}
			if info := d.Info(); info.Name != "sqlite" || info.Location != d.path || info.ReadOnly {
				t.Fatalf("Info %+v", info)
			}
			if _, shared := any(d).(tgdriver.SharedClock); shared {
				t.Fatal("the SQLite driver is a SharedClock: one server process per file judges leases by its own clock")
			}
		})
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), Options{Sync: "sometimes"}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Open with an unknown sync mode: %v, want ErrInvalidOption", err)
	}
}

func TestGroupCommit(t *testing.T) {
	var batches, ops atomic.Int64
	d := openTest(t, Options{}, tgdriver.Hooks{OnBatch: func(size int, _ time.Duration, err error) {
		if err != nil {
			t.Errorf("batch failed: %v", err)
		}
		batches.Add(1)
		ops.Add(int64(size))
	}})
	release, blocked := blockWriter(t, d)
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- d.Write(context.Background(), func(tx tgdriver.Tx) error {
				_, err := tx.EnsureWorkflow(context.Background(), "wf-"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1)
				return err
			})
		}()
	}
	waitQueued(t, d, n)
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	wfs, err := d.Reads().Workflows(context.Background())
	if err != nil || len(wfs) != n {
		t.Fatalf("%d workflows (%v), want %d", len(wfs), err, n)
	}
	if b := batches.Load(); b > 3 || ops.Load() != n+1 {
		t.Fatalf("%d batches for %d operations, want the %d queued ones committed together", b, ops.Load(), n)
	}
}

func TestRejectedOpLeavesOthers(t *testing.T) {
	var sizes []int
	var mu sync.Mutex
	d := openTest(t, Options{}, tgdriver.Hooks{OnBatch: func(size int, _ time.Duration, err error) {
		mu.Lock()
		sizes = append(sizes, size)
		mu.Unlock()
	}})
	release, blocked := blockWriter(t, d)
	boom := errors.New("rejected")
	results := make([]chan error, 3)
	for i, wf := range []string{"a", "b", "c"} {
		results[i] = make(chan error, 1)
		go func() {
			results[i] <- d.Write(context.Background(), func(tx tgdriver.Tx) error {
				addTask(t, tx, newTask(wf, "n1"))
				if wf == "b" {
					return boom
				}
				return nil
			})
		}()
		waitQueued(t, d, i+1) // in order a, b, c
	}
	release()
	<-blocked
	for i, want := range []error{nil, boom, nil} {
		if err := <-results[i]; !errors.Is(err, want) && err != want {
			t.Fatalf("op %d: %v, want %v", i, err, want)
		}
	}
	ctx := context.Background()
	for wf, want := range map[string]bool{"a": true, "b": false, "c": true} {
		_, err := d.Reads().TaskByNode(ctx, wf, "n1")
		if got := err == nil; got != want {
			t.Fatalf("task of %s exists %v (%v), want %v", wf, got, err, want)
		}
		if !want && !errors.Is(err, tgdriver.ErrNoRows) {
			t.Fatalf("missing task: %v, want ErrNoRows", err)
		}
	}
	mu.Lock()
	got := append([]int(nil), sizes...)
	mu.Unlock()
	if len(got) != 2 || got[1] != 3 {
		t.Fatalf("batch sizes %v, want [1 3]", got)
	}

	// A batch of one runs without a savepoint: its failure rolls the
	// transaction back.
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		addTask(t, tx, newTask("alone", "n1"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("lone op: %v, want %v", err, boom)
	}
	if _, err := d.Reads().Workflow(ctx, "alone"); !errors.Is(err, tgdriver.ErrNoRows) {
		t.Fatalf("the failed lone op's workflow: %v, want ErrNoRows", err)
	}
	// And the writer goes on.
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("after", "n1")); return nil })
}

func TestPanicBecomesError(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	err := d.Write(context.Background(), func(tgdriver.Tx) error { panic("bug") })
	if !errors.Is(err, ErrInternal) {
		t.Fatalf("panicking op: %v, want ErrInternal", err)
	}
	write(t, d, func(tgdriver.Tx) error { return nil })
}

func TestBatchStart(t *testing.T) {
	var mu sync.Mutex
	var log []string
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	var d *Driver
	var afterSawAlive atomic.Int64
	d = openTest(t, Options{}, tgdriver.Hooks{BatchStart: func(ctx context.Context, tx tgdriver.Tx) (func(), error) {
		note("start")
		if err := tx.TouchAlive(ctx, 4242); err != nil {
			return nil, err
		}
		return func() {
			note("after")
			// Runs after COMMIT: another connection sees the write.
			var ms int64
			if err := d.rdb.QueryRow(`SELECT alive_at_ms FROM server_clock`).Scan(&ms); err == nil {
				afterSawAlive.Store(ms)
			}
		}, nil
	}})
	release, blocked := blockWriter(t, d)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Write(context.Background(), func(tx tgdriver.Tx) error {
				ms, ok, err := tx.ReadAlive(context.Background())
				if err != nil || !ok || ms != 4242 {
					t.Errorf("op %d: alive %d %v %v; BatchStart must run before", i, ms, ok, err)
				}
				note("op")
				return nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	waitQueued(t, d, 3)
	release()
	wg.Wait()
	<-blocked
	mu.Lock()
	got := append([]string(nil), log...)
	mu.Unlock()
	want := []string{"start", "after", "start", "op", "op", "op", "after"}
	if len(got) != len(want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("log %v, want %v", got, want)
		}
	}
	if afterSawAlive.Load() != 4242 {
		t.Fatalf("after saw alive %d, want 4242 (committed)", afterSawAlive.Load())
	}

	// A failing BatchStart fails the batch and its after never runs.
	d2 := openTest(t, Options{}, tgdriver.Hooks{BatchStart: func(context.Context, tgdriver.Tx) (func(), error) {
		return func() { t.Error("after ran for a failed BatchStart") }, errors.New("hook refused")
	}})
	if err := d2.Write(context.Background(), func(tgdriver.Tx) error { return nil }); err == nil {
		t.Fatal("Write succeeded though BatchStart failed")
	}
}

func TestSkipsCancelledOp(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	release, blocked := blockWriter(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	ran := atomic.Bool{}
	errc := make(chan error, 1)
	go func() {
		errc <- d.Write(ctx, func(tgdriver.Tx) error { ran.Store(true); return nil })
	}()
	waitQueued(t, d, 1)
	cancel()
	release()
	<-blocked
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled op: %v, want context.Canceled", err)
	}
	if ran.Load() {
		t.Fatal("the cancelled op ran")
	}
}

func TestUpdateSQLPerShape(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error {
		seq := addTask(t, tx, newTask("wf", "n1"))
		for i := range 5 {
			if _, _, err := tx.UpdateTask(ctx, seq, tgdriver.TaskSet{StatusMessage: tgdriver.Val("x"), UpdatedAtMS: int64(i)},
				tgdriver.TaskGuard{States: []string{"pending"}}); err != nil {
				return err
			}
		}
		_, _, err := tx.UpdateTask(ctx, seq, tgdriver.TaskSet{Owner: tgdriver.Null[string](), UpdatedAtMS: 9}, tgdriver.TaskGuard{})
		return err
	})
	if len(d.updates) != 2 {
		t.Fatalf("%d cached update shapes, want 2: %v", len(d.updates), d.updates)
	}
}

func TestClaimAndLeaseQueries(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error {
		a := addTask(t, tx, newTask("wf1", "a"))
		addTask(t, tx, newTask("wf2", "a"))
		r, ok, err := tx.NextPending(ctx, "", nil)
		if err != nil || !ok || r.Seq != a {
			t.Errorf("NextPending: %+v %v %v", r, ok, err)
		}
		r, ok, err = tx.NextPending(ctx, "wf2", nil)
		if err != nil || !ok || r.WorkflowID != "wf2" {
			t.Errorf("NextPending(wf2): %+v %v %v", r, ok, err)
		}
		if _, ok, err := tx.NextPending(ctx, "none", nil); ok || err != nil {
			t.Errorf("NextPending(none): %v %v", ok, err)
		}
		if _, ok, err := tx.UpdateTask(ctx, a, tgdriver.TaskSet{State: tgdriver.Val("claimed"), LeaseExpiresAtMS: tgdriver.Val[int64](5000),
			LeaseMS: tgdriver.Val[int64](4000), UpdatedAtMS: 1000}, tgdriver.TaskGuard{}); !ok || err != nil {
			t.Errorf("claim: %v %v", ok, err)
		}
		refs, err := tx.ExpiredLeases(ctx, 4999, 10)
		if err != nil || len(refs) != 0 {
			t.Errorf("ExpiredLeases(4999): %+v %v", refs, err)
		}
		refs, err = tx.ExpiredLeases(ctx, 5000, 10)
		if err != nil || len(refs) != 1 || refs[0] != (tgdriver.TaskRef{Seq: a, WorkflowID: "wf1", ExpiresAtMS: 5000}) {
			t.Errorf("ExpiredLeases(5000): %+v %v", refs, err)
		}
		// Shift by 10 s, capped at now + lease_ms.
		refs, err = tx.ShiftLeases(ctx, 10000, 6000, 30000)
		if err != nil || len(refs) != 1 || refs[0].ExpiresAtMS != 10000 {
			t.Errorf("ShiftLeases: %+v %v", refs, err)
		}
		return nil
	})
	ms, ok, err := d.Reads().NextLeaseExpiry(ctx)
	if err != nil || !ok || ms != 10000 {
		t.Fatalf("NextLeaseExpiry %d %v %v", ms, ok, err)
	}
	counts, err := d.Reads().CountByState(ctx)
	if err != nil || counts["pending"] != 1 || counts["claimed"] != 1 {
		t.Fatalf("CountByState %v %v", counts, err)
	}
	wfs, err := d.Reads().PendingWorkflows(ctx, 10)
	if err != nil || len(wfs) != 1 || wfs[0] != "wf2" {
		t.Fatalf("PendingWorkflows %v %v", wfs, err)
	}
	for _, f := range []tgdriver.ListFilter{{}, {WorkflowID: "wf1"}, {State: "claimed"}, {WorkflowID: "wf2", State: "pending", Limit: 1}} {
		ts, err := d.Reads().ListTasks(ctx, f)
		want := map[bool]int{true: 2, false: 1}[f == (tgdriver.ListFilter{})]
		if err != nil || len(ts) != want {
			t.Fatalf("ListTasks(%+v): %d %v, want %d", f, len(ts), err, want)
		}
	}
	// The claim-next and lease statements read their pinned partial index:
	// INDEXED BY makes a statement fail to prepare if the index is gone.
	// A claim without capabilities reads tasks_ready_plain (tasks that
	// require nothing), one with capabilities tasks_ready_by_priority; both
	// hold only claimable (due) tasks, and tasks_due the ones not yet due.
	for q, index := range map[string]string{sqlNextPending: "tasks_ready_plain", sqlNextPendingCaps: "tasks_ready_by_priority",
		sqlNextPendingInWorkflow: "tasks_ready_by_workflow_priority", sqlNextPendingInWorkflowCaps: "tasks_ready_by_workflow_priority",
		sqlCountClaimable: "tasks_ready_plain", sqlCountClaimableCaps: "tasks_ready_by_priority",
		sqlCountClaimableWF: "tasks_ready_by_workflow_priority", sqlCountClaimableWFCaps: "tasks_ready_by_workflow_priority",
		sqlClaimable: "tasks_ready_plain", sqlClaimableCaps: "tasks_ready_by_priority",
		sqlClaimableInWorkflow: "tasks_ready_by_workflow_priority", sqlClaimableInWorkflowCaps: "tasks_ready_by_workflow_priority",
		sqlDueTasks: "tasks_due", sqlNextDue: "tasks_due",
		sqlExpiredLeases: "tasks_leases", sqlNextLeaseExpiry: "tasks_leases", sqlPendingWorkflows: "tasks_ready_by_priority"} {
		plan := queryPlan(t, d.rdb, q)
		// The claim scans read the closed concurrency keys from their
		// indexes (concurrency_keys_at_cap, concurrency_keys_rate_open),
		// never every key.
		if p := strings.Join(plan, "; "); strings.Contains(p, "SCAN concurrency_keys") && !strings.Contains(p, "SCAN concurrency_keys USING") {
			t.Fatalf("plan of %s: %s reads every concurrency key", q, p)
		}
		if p := strings.Join(plan, "; "); !strings.Contains(p, "USING INDEX "+index) && !strings.Contains(p, "USING COVERING INDEX "+index) {
			t.Fatalf("plan of %s: %s, want index %s", q, p, index)
		} else if strings.Contains(p, "TEMP B-TREE FOR ORDER BY") {
			t.Fatalf("plan of %s: %s sorts; the index must give the order (priority DESC, seq)", q, p)
		}
	}
}

func TestSnapshot(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	err := d.Snapshot(ctx, func(r tgdriver.Reads) error {
		write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "b")); return nil })
		ts, err := r.ListTasks(ctx, tgdriver.ListFilter{WorkflowID: "wf"})
		if err != nil || len(ts) != 1 {
			t.Errorf("snapshot sees %d tasks (%v), want 1", len(ts), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestChangesAfterAnotherConnection(t *testing.T) {
	d := openTest(t, Options{WatchInterval: 5 * time.Millisecond}, tgdriver.Hooks{})
	other, err := sql.Open("sqlite3", "file:"+d.path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// Drain a change the driver's own first writes may have caused.
	select {
	case <-d.Changes():
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := other.Exec(`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('x', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if c := testwait.Recv(t, "a change after another connection's commit", d.Changes()); !c.Unknown {
		t.Fatalf("change %+v, want Unknown", c)
	}
}

func TestCloseTwiceAndWriteAfterClose(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := d.Write(context.Background(), func(tgdriver.Tx) error { return nil }); !errors.Is(err, tgdriver.ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
	if err := d.Ready(context.Background()); !errors.Is(err, tgdriver.ErrClosed) {
		t.Fatalf("Ready after Close: %v, want ErrClosed", err)
	}
	if err := d.Start(tgdriver.Hooks{}); err == nil {
		t.Fatal("a second Start succeeded")
	}
	// The WAL was checkpointed and removed: the data is in the file.
	if fi, err := os.Stat(d.path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("WAL of %d bytes left after Close", fi.Size())
	}
}

func TestReadOnly(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	ro, err := OpenReadOnly(ctx, d.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.Info().ReadOnly || ro.Changes() != nil {
		t.Fatalf("read-only Info %+v, Changes %v", ro.Info(), ro.Changes())
	}
	err = ro.Write(ctx, func(tgdriver.Tx) error { t.Error("a read-only write ran"); return nil })
	if !errors.Is(err, tgdriver.ErrReadOnlyStore) {
		t.Fatalf("read-only Write: %v, want ErrReadOnlyStore", err)
	}
	if _, err := ro.Reads().TaskByID(ctx, "wf-a"); err != nil {
		t.Fatalf("read-only read: %v", err)
	}
	res, err := ro.Check(ctx)
	if err != nil || !res.OK() || res.Checkpointed {
		t.Fatalf("read-only Check %+v %v", res, err)
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	if err := ro.Backup(ctx, dest); err != nil {
		t.Fatal(err)
	}
	if err := ro.Backup(ctx, dest); !errors.Is(err, ErrBackupExists) {
		t.Fatalf("second backup: %v, want ErrBackupExists", err)
	}
	cp, err := OpenReadOnly(ctx, dest, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if _, err := cp.Reads().TaskByID(ctx, "wf-a"); err != nil {
		t.Fatalf("backup lacks the task: %v", err)
	}
	if _, err := OpenReadOnly(ctx, filepath.Join(t.TempDir(), "none.db"), Options{}); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("OpenReadOnly of nothing: %v, want ErrNoDatabase", err)
	}
}

func TestReadyCheckCheckpoint(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	if err := d.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	res, err := d.Check(ctx)
	if err != nil || !res.OK() || !res.Checkpointed {
		t.Fatalf("Check %+v %v", res, err)
	}
	cp, err := Checkpoint(ctx, d.path)
	if err != nil || cp.WALFrames < 0 {
		t.Fatalf("Checkpoint %+v %v", cp, err)
	}
}

func TestFilesReplaced(t *testing.T) {
	d := openTest(t, Options{WatchInterval: time.Hour}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	if err := os.Rename(d.path, d.path+".moved"); err != nil {
		t.Fatal(err)
	}
	err := d.Write(ctx, func(tgdriver.Tx) error { return nil })
	if !errors.Is(err, tgdriver.ErrFilesReplaced) || !errors.Is(err, tgdriver.ErrUnavailable) {
		t.Fatalf("Write after the file moved: %v, want ErrFilesReplaced", err)
	}
	if reason, retry, ok := tgdriver.UnavailableReason(d.Ready(ctx)); !ok || reason != "files_replaced" || retry {
		t.Fatalf("Ready after the file moved: %s %v %v", reason, retry, ok)
	}
	if err := d.Close(); !errors.Is(err, tgdriver.ErrFilesReplaced) {
		t.Fatalf("Close: %v, want ErrFilesReplaced (no checkpoint)", err)
	}
	// Close leaves the connections open on purpose: closing the last one
	// would checkpoint into files that are no longer the database's, and a
	// server exits after this. This test's process goes on, so it closes
	// them itself (into the moved file, which nothing else uses).
	d.ckpt.db.Close()
	d.rdb.Close()
	d.wdb.Close()
}

// A removed -wal says what may be lost and how to find out, in the error
// and the log (issue 29 item 9).
func TestRemovedWALSaysWhatMayBeLost(t *testing.T) {
	var logs testwait.Buffer
	d := openTest(t, Options{WatchInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	if err := os.Remove(d.path + "-wal"); err != nil {
		t.Fatal(err)
	}
	err := d.Write(ctx, func(tgdriver.Tx) error { return nil })
	if !errors.Is(err, tgdriver.ErrFilesReplaced) {
		t.Fatalf("Write after the -wal was removed: %v, want ErrFilesReplaced", err)
	}
	for what, text := range map[string]string{"error": err.Error(), "log": logs.String()} {
		for _, want := range []string{"-wal was removed", "acknowledged since the last checkpoint", "lost", "audit verify --anchor"} {
			if !strings.Contains(text, want) {
				t.Errorf("the %s lacks %q:\n%s", what, want, text)
			}
		}
	}
	d.Close()
	d.ckpt.db.Close()
	d.rdb.Close()
	d.wdb.Close()
}

// Writes racing Close each get nil or ErrClosed, and none is left hanging;
// every write that returned nil is in the file.
func TestWritesRacingClose(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	const n = 32
	var wg sync.WaitGroup
	var committed atomic.Int64
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.Write(context.Background(), func(tx tgdriver.Tx) error {
				_, err := tx.EnsureWorkflow(context.Background(), "wf"+string(rune('A'+i)), 1)
				return err
			})
			if err == nil {
				committed.Add(1)
			} else if !errors.Is(err, tgdriver.ErrClosed) {
				errs <- err
			}
		}()
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("write racing Close: %v, want nil or ErrClosed", err)
	}
	ro, err := OpenReadOnly(context.Background(), d.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	wfs, err := ro.Reads().Workflows(context.Background())
	if err != nil || int64(len(wfs)) != committed.Load() {
		t.Fatalf("%d workflows in the file (%v), %d writes acknowledged", len(wfs), err, committed.Load())
	}
}

// A failed COMMIT fails every operation of the batch, including those whose
// own work succeeded: none of them is committed, and the next batch commits
// normally. (A foreign key checked only at COMMIT plays the failure.)
func TestFailedCommitFailsWholeBatch(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	release, blocked := blockWriter(t, d)
	results := make([]chan error, 3)
	for i, wf := range []string{"a", "b", "c"} {
		results[i] = make(chan error, 1)
		go func() {
			results[i] <- d.Write(context.Background(), func(tx tgdriver.Tx) error {
				addTask(t, tx, newTask(wf, "n1"))
				if wf == "b" {
					w := tx.(*wtx)
					if _, err := w.exec(`PRAGMA defer_foreign_keys = ON`); err != nil {
						return err
					}
					return drivertest.InsertEdge(context.Background(), tx, 424242, 434343)
				}
				return nil
			})
		}()
		waitQueued(t, d, i+1)
	}
	release()
	<-blocked
	for i := range results {
		if err := <-results[i]; err == nil {
			t.Fatalf("op %d of a batch whose commit failed reported success", i)
		}
	}
	ctx := context.Background()
	for _, wf := range []string{"a", "b", "c"} {
		if _, err := d.Reads().TaskByNode(ctx, wf, "n1"); !errors.Is(err, tgdriver.ErrNoRows) {
			t.Fatalf("task of %s after a failed commit: %v, want none", wf, err)
		}
	}
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("d", "n1")); return nil })
	if _, err := d.Reads().TaskByNode(ctx, "d", "n1"); err != nil {
		t.Fatalf("the next batch: %v", err)
	}
}

// queryPlan returns the lines of SQLite's EXPLAIN QUERY PLAN of q, each
// of its parameters NULL.
func queryPlan(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+q, make([]any, strings.Count(q, "?"))...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
