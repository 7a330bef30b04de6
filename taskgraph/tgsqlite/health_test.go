package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/fsfault"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

func wantUnavailable(t *testing.T, what string, err, sentinel error, reason string, retryable bool) {
	t.Helper()
	if !errors.Is(err, sentinel) || !errors.Is(err, tgdriver.ErrUnavailable) {
		t.Fatalf("%s: %v, want %v", what, err, sentinel)
	}
	if r, retry, ok := tgdriver.UnavailableReason(err); !ok || r != reason || retry != retryable {
		t.Fatalf("%s: reason %q retryable %v (ok %v), want %q %v", what, r, retry, ok, reason, retryable)
	}
}

// holdLock takes the database's write lock on a connection of its own until
// release is called.
func holdLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			conn.ExecContext(context.Background(), `ROLLBACK`)
			conn.Close()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// A write that cannot get the lock within the busy timeout fails with the
// retryable ErrBusy; Ready answers by its own deadline; once the lock is
// released both succeed.
func TestBusyWriteFailsWithErrBusy(t *testing.T) {
	d := openTest(t, Options{BusyTimeout: 50 * time.Millisecond}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	release := holdLock(t, d.path)
	err := d.Write(ctx, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "b")); return nil })
	wantUnavailable(t, "write", err, tgdriver.ErrBusy, "busy", true)
	if !strings.Contains(err.Error(), "database busy: locked by another process") {
		t.Fatalf("write: %q does not name the cause", err)
	}
	wantUnavailable(t, "ready", d.Ready(ctx), tgdriver.ErrBusy, "busy", true)
	release()
	if err := d.Ready(ctx); err != nil {
		t.Fatalf("ready after the lock was released: %v", err)
	}
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "b")); return nil })
}

func TestReadyHonoursItsDeadlineWhileLocked(t *testing.T) {
	d := openTest(t, Options{BusyTimeout: 3 * time.Second}, tgdriver.Hooks{})
	holdLock(t, d.path)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	wantUnavailable(t, "ready", d.Ready(ctx), tgdriver.ErrBusy, "busy", true)
}

// On a full disk a write and the readiness probe fail with ErrDiskFull,
// nothing of the write is kept, and once space is freed both succeed.
func TestDiskFullWriteFailsWithErrDiskFull(t *testing.T) {
	dir := fsfault.Tmpfs(t, 4<<20)
	d, err := Open(context.Background(), filepath.Join(dir, "tasks.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Start(tgdriver.Hooks{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	filler := fsfault.Fill(t, dir)
	big := newTask("wf", "big")
	big.Payload = `{"blob":"` + strings.Repeat("x", 60<<10) + `"}`
	err = d.Write(ctx, func(tx tgdriver.Tx) error { addTask(t, tx, big); return nil })
	wantUnavailable(t, "write", err, tgdriver.ErrDiskFull, "disk_full", true)
	wantUnavailable(t, "ready", d.Ready(ctx), tgdriver.ErrDiskFull, "disk_full", true)
	if ts, err := d.Reads().ListTasks(ctx, tgdriver.ListFilter{WorkflowID: "wf"}); err != nil || len(ts) != 1 {
		t.Fatalf("after the failed write the workflow has %d tasks (%v), want 1", len(ts), err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := d.Ready(ctx); err != nil {
		t.Fatalf("ready after freeing space: %v", err)
	}
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, big); return nil })
	if res, err := d.Check(ctx); err != nil || !res.OK() {
		t.Fatalf("integrity after the disk filled up: %v %v", res.Integrity, err)
	}
}

// A folder that refuses new files makes Open fail with ErrReadOnly.
func TestOpenInReadOnlyFolder(t *testing.T) {
	dir := fsfault.ReadOnly(t, t.TempDir())
	_, err := Open(context.Background(), filepath.Join(dir, "tasks.db"), Options{})
	wantUnavailable(t, "open", err, tgdriver.ErrReadOnly, "read_only", false)
}

// Ready commits a probe and changes no data.
func TestReadyChangesNothing(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	version := func() [2]int64 {
		var v [2]int64
		if err := d.rdb.QueryRow(`SELECT version, applied_at_ms FROM schema_version`).Scan(&v[0], &v[1]); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := version()
	for range 3 {
		if err := d.Ready(context.Background()); err != nil {
			t.Fatalf("Ready: %v", err)
		}
	}
	if after := version(); after != before {
		t.Fatalf("Ready changed schema_version from %v to %v", before, after)
	}
}

// Servers started together on a new database all open it: SQLite answers
// some of them SQLITE_BUSY at once, without its busy handler, while another
// turns the file to WAL mode or migrates it, and Open tries again within
// the busy timeout. The schema is applied once.
func TestOpenTogetherOnANewDatabase(t *testing.T) {
	const rounds, servers = 20, 8
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "tasks.db")
		drivers := make(chan *Driver, servers)
		errs := make(chan error, servers)
		start := make(chan struct{})
		for range servers {
			go func() {
				<-start
				d, err := Open(context.Background(), path, Options{BusyTimeout: 10 * time.Second})
				errs <- err
				drivers <- d
			}()
		}
		close(start)
		for range servers {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: one of %d servers opening a new database: %v", round, servers, err)
			}
			d := <-drivers
			t.Cleanup(func() { d.Close() })
		}
		db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'tasks'`).Scan(&n)
		db.Close()
		if err != nil || n != 1 {
			t.Fatalf("round %d: %d tasks tables (%v), want 1", round, n, err)
		}
	}
}

// Open gives up with ErrBusy once the busy timeout has passed while another
// process holds the write lock: the retry of an immediate SQLITE_BUSY does
// not wait longer than the timeout says.
func TestOpenWhileLockedFailsWithErrBusy(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	path := d.path
	d.Close()
	holdLock(t, path)
	_, err := Open(context.Background(), path, Options{BusyTimeout: 50 * time.Millisecond})
	wantUnavailable(t, "open while locked", err, tgdriver.ErrBusy, "busy", true)
}

// A WAL database on a read-only mount, closed cleanly (no -wal, no -shm
// beside it), opens for reading: SQLite cannot create the -shm there, and
// the read commands must still work, not fail with "no such file or
// directory" (issue 29 item 12).
func TestOpenReadOnlyOnReadOnlyMount(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.db")
	d, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(tgdriver.Hooks{}); err != nil {
		t.Fatal(err)
	}
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + f); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left after a clean close: %v", f, err)
		}
	}
	ro := filepath.Join(fsfault.ReadOnly(t, dir), "tasks.db")
	r, err := OpenReadOnly(context.Background(), ro, Options{})
	if err != nil {
		t.Fatalf("OpenReadOnly on a read-only mount: %v", err)
	}
	defer r.Close()
	wfs, err := r.Reads().Workflows(context.Background())
	if err != nil || len(wfs) != 1 || wfs[0].WorkflowID != "wf" {
		t.Fatalf("workflows read on a read-only mount: %v %v", wfs, err)
	}
}

// A WAL database on a read-only mount whose -wal holds writes (a copy taken
// while a server ran) cannot be read without creating its -shm: the error
// says that, not "no such file or directory" (issue 29 item 12).
func TestOpenReadOnlyOnReadOnlyMountWithWAL(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	dir := t.TempDir()
	for _, f := range []string{"", "-wal"} {
		b, err := os.ReadFile(d.path + f)
		if err != nil {
			t.Fatal(err)
		}
		if f == "-wal" && len(b) == 0 {
			t.Fatal("the -wal is empty: nothing to test")
		}
		if err := os.WriteFile(filepath.Join(dir, "tasks.db"+f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ro := filepath.Join(fsfault.ReadOnly(t, dir), "tasks.db")
	_, err := OpenReadOnly(context.Background(), ro, Options{})
	if err == nil || !strings.Contains(err.Error(), "-shm") || !strings.Contains(err.Error(), "the folder is read-only") || !strings.Contains(err.Error(), "copy the database with its -wal") {
		t.Fatalf("OpenReadOnly of a WAL database with writes on a read-only mount: %v", err)
	}
}
