package taskgraph

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/schema"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// fileBytes returns the content of path, or nil when it does not exist.
func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dbFiles snapshots the database file and its WAL (not the -shm file, the
// shared-memory index that every reader, even a read-only one, updates).
type dbFiles struct{ db, wal []byte }

func snapshotFiles(t *testing.T, path string) dbFiles {
	t.Helper()
	return dbFiles{db: fileBytes(t, path), wal: fileBytes(t, path+"-wal")}
}

func (f dbFiles) mustEqual(t *testing.T, path, what string) {
	t.Helper()
	now := snapshotFiles(t, path)
	if !bytes.Equal(f.db, now.db) {
		t.Errorf("%s wrote the database file (%d bytes before, %d after)", what, len(f.db), len(now.db))
	}
	if !bytes.Equal(f.wal, now.wal) || (f.wal == nil) != (now.wal == nil) {
		t.Errorf("%s wrote the WAL (%d bytes before, %d after, existed before: %v, after: %v)", what, len(f.wal), len(now.wal), f.wal != nil, now.wal != nil)
	}
}

// holdReader opens a second, independent connection to path and holds a
// read transaction on it, as a long audit verify, db backup or sqlite3 shell
// in another process would, until the returned function is called.
func holdReader(t *testing.T, path string) (release func()) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks`).Scan(&n); err != nil { // the snapshot starts here
		t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		conn.ExecContext(ctx, `ROLLBACK`)
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// withoutWaiting runs fn and fails the test if it never returns: everything
// fn does must finish while the reader that the caller holds keeps its
// transaction, since the reader is released only after fn. Anything that
// waited for the reader would wait (the busy timeouts are an hour) until the
// test's deadline, and fail then.
func withoutWaiting(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	testwait.Recv(t, what+" to return while a reader held its transaction (it must not wait for readers)", done)
}

func TestReadOnlyStoreRefusesEveryWrite(t *testing.T) {
	b := setup(t)
	a := b.create(t, "wf", "a")
	dep := b.create(t, "wf", "b", "a")
	c := b.claim(t, "w1", a.TaskID, time.Minute)
	ro, err := OpenReadOnly(b.ctx, b.path, Options{Clock: b.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.ReadOnly() || b.s.ReadOnly() {
		t.Fatal("ReadOnly() does not tell the stores apart")
	}
	before := snapshotFiles(t, b.path)
	h := holder(c)
	op := Operator{Name: "ops", Reason: "test"}
	writes := map[string]func() error{
		"CreateTask":     func() error { _, err := ro.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "x"}); return err },
		"CreateWorkflow": func() error { _, err := ro.CreateWorkflow(b.ctx, "wf2", []NodeSpec{{NodeID: "x"}}); return err },
		"Claim": func() error {
			_, _, err := ro.Claim(b.ctx, ClaimRequest{Owner: "w2", TaskID: dep.TaskID, Lease: time.Minute})
			return err
		},
		"ClaimNext":     func() error { _, _, err := ro.Claim(b.ctx, ClaimRequest{Owner: "w2", Lease: time.Minute}); return err },
		"Heartbeat":     func() error { _, err := ro.Heartbeat(b.ctx, h, time.Minute); return err },
		"Complete":      func() error { _, err := ro.Complete(b.ctx, h, json.RawMessage(`1`)); return err },
		"Fail":          func() error { _, err := ro.Fail(b.ctx, h, "x", true); return err },
		"Cancel":        func() error { _, err := ro.Cancel(b.ctx, h); return err },
		"CancelTask":    func() error { _, _, err := ro.CancelTask(b.ctx, dep.TaskID, "x"); return err },
		"Requeue":       func() error { _, err := ro.Requeue(b.ctx, a.TaskID, op); return err },
		"Skip":          func() error { _, err := ro.Skip(b.ctx, dep.TaskID, op); return err },
		"AbortWorkflow": func() error { _, err := ro.AbortWorkflow(b.ctx, "wf", op); return err },
		"Prune":         func() error { _, err := ro.Prune(b.ctx, t0.Add(time.Hour)); return err },
		"ExpireLeases":  func() error { _, err := ro.ExpireLeases(b.ctx); return err },
	}
	for name, w := range writes {
		if err := w(); !errors.Is(err, ErrReadOnlyStore) || !strings.Contains(err.Error(), "read-write") {
			t.Errorf("%s on a read-only store: %v, want ErrReadOnlyStore naming what does write", name, err)
		}
	}
	// The lease lapses; the read-only store shows it as stored instead of
	// expiring it, and the file stays as it was.
	b.clock.Advance(2 * time.Minute)
	got, err := ro.Task(b.ctx, a.TaskID)
	if err != nil || got.State != StateClaimed || got.Owner != "w1" || got.LeaseExpiresAt.After(b.clock.Now()) {
		t.Fatalf("Task of a lapsed lease on the read-only store: %+v, %v; want it claimed by w1 with the expiry past", got, err)
	}
	before.mustEqual(t, b.path, "the refused writes")
	// The read-write store still holds the claim until it processes it.
	if got, err := b.s.Task(b.ctx, a.TaskID); err != nil || got.State != StatePending {
		t.Fatalf("read-write Task after expiry: %+v %v, want pending", got, err)
	}
}

// errNotADB stands for SQLite's "file is not a database" in the table below.
var errNotADB = errors.New("SQLITE_NOTADB")

func TestOpenReadOnlyRefusesWhatItCannotRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing", "tasks.db")
	_, err := OpenReadOnly(ctx, missing, Options{})
	if !errors.Is(err, ErrNoDatabase) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing file: %v, want ErrNoDatabase naming %s", err, missing)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenReadOnly created the folder: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(ctx, empty, Options{}); !errors.Is(err, ErrNoDatabase) || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty file: %v, want ErrNoDatabase saying it is empty", err)
	}
	// A database whose schema_version records nothing is older than any
	// binary; one recording a later version is newer.
	raw := func(name string, stmts ...string) string {
		p := filepath.Join(dir, name)
		db, err := sql.Open("sqlite3", "file:"+p)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, s := range stmts {
			if _, err := db.Exec(s); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	old := raw("old.db", `CREATE TABLE schema_version (singleton INTEGER PRIMARY KEY, version INTEGER NOT NULL)`)
	newer := raw("newer.db", `CREATE TABLE schema_version (singleton INTEGER PRIMARY KEY, version INTEGER NOT NULL)`,
		`INSERT INTO schema_version VALUES (1, 999)`)
	foreign := raw("foreign.db", `CREATE TABLE notes (body TEXT)`)
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a database\n"), 300), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error
		says string
	}{{old, schema.ErrTooOld, "serve"}, {newer, schema.ErrTooNew, "upgrade"}, {foreign, schema.ErrForeign, "not a graph-engineering database"},
		{garbage, errNotADB, "not a graph-engineering database or is damaged"}} {
		before := snapshotFiles(t, tc.path)
		_, err := OpenReadOnly(ctx, tc.path, Options{})
		var se sqlite3.Error
		if tc.want == errNotADB && errors.As(err, &se) && se.Code == sqlite3.ErrNotADB {
			err = fmt.Errorf("%w: %w", errNotADB, err)
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v naming the path and saying %q", filepath.Base(tc.path), err, tc.want, tc.says)
		}
		before.mustEqual(t, tc.path, "a refused read-only open")
	}
}

// A read-only store beside a read-write one and a reader holding a long
// transaction: it reads, checks and backs up without writing a byte or
// waiting for the reader, while the read-write store keeps committing, and
// the read-write store's Check and Close do not wait for the reader either.
func TestReadOnlyStoreAndCheckpointsNeverWaitForReaders(t *testing.T) {
	b := setupWith(t, Options{BusyTimeout: time.Hour})
	a := b.create(t, "wf", "a")
	b.create(t, "wf", "b", "a")
	release := holdReader(t, b.path)
	// Committed after the reader's snapshot: the WAL holds frames the reader
	// does not see, so a checkpoint could not finish without waiting for it.
	c := b.claim(t, "w1", a.TaskID, time.Minute)
	before := snapshotFiles(t, b.path)
	if before.wal == nil {
		t.Fatal("no WAL beside the database")
	}
	withoutWaiting(t, "the read-only store", func() {
		ro, err := OpenReadOnly(b.ctx, b.path, Options{Clock: b.clock, BusyTimeout: time.Hour})
		if err != nil {
			t.Error(err)
			return
		}
		if got, err := ro.Task(b.ctx, a.TaskID); err != nil || got.State != StateClaimed {
			t.Errorf("read-only Task: %+v %v", got, err)
		}
		if _, err := ro.VerifyHistory(b.ctx); err != nil {
			t.Errorf("read-only VerifyHistory: %v", err)
		}
		if v, err := ro.Workflow(b.ctx, "wf"); err != nil || len(v.Tasks) != 2 {
			t.Errorf("read-only Workflow: %+v %v", v, err)
		}
		res, err := ro.Check(b.ctx)
		if err != nil || !res.OK() || res.Checkpointed || res.WALBytes != int64(len(before.wal)) {
			t.Errorf("read-only Check: %+v %v; want ok, no checkpoint and the WAL's %d bytes", res, err, len(before.wal))
		}
		dest := filepath.Join(t.TempDir(), "backup.db")
		if err := ro.Backup(b.ctx, dest); err != nil {
			t.Errorf("read-only Backup: %v", err)
		} else if fingerprint(t, dest) != fingerprint(t, b.path) {
			t.Error("the read-only store's backup differs from the database")
		} else {
			readBackupReadOnly(t, dest)
		}
		if err := ro.Close(); err != nil {
			t.Errorf("read-only Close: %v", err)
		}
	})
	before.mustEqual(t, b.path, "the read-only store")
	withoutWaiting(t, "the read-write store's writes, Check and Close", func() {
		if _, err := b.s.Heartbeat(b.ctx, holder(c), time.Minute); err != nil {
			t.Errorf("heartbeat while the reader holds its transaction: %v", err)
		}
		res, err := b.s.Check(b.ctx)
		if err != nil || !res.OK() || !res.Checkpointed || res.CheckpointedFrames >= res.WALFrames {
			t.Errorf("Check: %+v %v; want a partial PASSIVE checkpoint", res, err)
		}
		if _, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`1`)); err != nil {
			t.Errorf("complete after Check: %v", err)
		}
		if err := b.s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	release()
	// Nothing was lost: a new store reads the completion.
	s, err := Open(b.ctx, b.path, Options{Clock: b.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Task(b.ctx, a.TaskID); err != nil || got.State != StateCompleted {
		t.Fatalf("after reopening: %+v %v", got, err)
	}
}

// With no other connection open and the WAL removed by the last close, a
// read-only store still reads and leaves the database file as it was. Like
// any reader of a WAL database, SQLite creates an empty -wal file (and the
// -shm index) beside it; the WAL stays empty.
func TestReadOnlyStoreOnAClosedDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTask(ctx, "wf", NodeSpec{NodeID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshotFiles(t, path)
	ro, err := OpenReadOnly(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := ro.ListTasks(ctx, ListFilter{}); err != nil || len(ts) != 1 {
		t.Errorf("ListTasks: %v %v", ts, err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	after := snapshotFiles(t, path)
	if !bytes.Equal(before.db, after.db) {
		t.Error("a read-only store on a closed database wrote the database file")
	}
	if before.wal != nil || len(after.wal) != 0 {
		t.Errorf("the WAL held %d bytes before (existed: %v) and %d after, want none and empty", len(before.wal), before.wal != nil, len(after.wal))
	}
}

// readBackupReadOnly reads a backup (a database that may not be in WAL mode)
// through a read-only store, which must leave it, journal mode included,
// byte for byte as it was.
func readBackupReadOnly(t *testing.T, path string) {
	t.Helper()
	before := snapshotFiles(t, path)
	ro, err := OpenReadOnly(context.Background(), path, Options{})
	if err != nil {
		t.Errorf("open the backup read-only: %v", err)
		return
	}
	var mode string
	rawScan(t, ro.Path(), `PRAGMA journal_mode`, nil, &mode)
	if n, err := ro.CountByState(context.Background()); err != nil || n[StateClaimed] != 1 {
		t.Errorf("the backup's tasks: %v %v", n, err)
	}
	if err := ro.Close(); err != nil {
		t.Error(err)
	}
	before.mustEqual(t, path, "reading a backup (journal mode "+mode+") read-only")
	t.Logf("backup journal mode: %s", mode)
}
