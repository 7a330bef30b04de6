package taskgraph

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/schema"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// walSize is the size of path's WAL file, 0 when there is none.
func walSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func openAt(t *testing.T, path string, clock lease.Clock) *Store {
	t.Helper()
	s, err := openSQLite(context.Background(), path, Options{Clock: clock})
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	return s
}

// Reopening an existing database is idempotent: no migration runs again and
// nothing changes.
func TestReopenIsIdempotent(t *testing.T) {
	b := setup(t)
	b.create(t, "wf", "a")
	b.create(t, "wf", "b", "a")
	readVersion := func() (int, int64) {
		var v int
		var at int64
		if err := rawDB(t, b.path).QueryRow(`SELECT version, applied_at_ms FROM schema_version`).Scan(&v, &at); err != nil {
			t.Fatal(err)
		}
		return v, at
	}
	v, at := readVersion()
	if v != latestSQLite(t) {
		t.Fatalf("version %d, want %d", v, latestSQLite(t))
	}
	fp := fingerprint(t, b.path)
	for i := 0; i < 3; i++ {
		s := openAt(t, b.path, b.clock)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if v2, at2 := readVersion(); v2 != v || at2 != at {
		t.Fatalf("schema_version changed on reopen: %d@%d -> %d@%d", v, at, v2, at2)
	}
	if fingerprint(t, b.path) != fp {
		t.Fatal("reopening changed the data")
	}
}

// A database written by a newer schema is refused with schema.ErrTooNew and
// left byte-for-byte as it was.
func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openAt(t, path, lease.NewManualClock(t0))
	if _, err := s.CreateTask(context.Background(), "wf", NodeSpec{NodeID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, path)
	mustExec(t, raw, `UPDATE schema_version SET version = ?`, latestSQLite(t)+1)
	if err := raw.Close(); err != nil { // the last connection checkpoints the WAL
		t.Fatal(err)
	}
	if n := walSize(t, path); n != 0 {
		t.Fatalf("fixture: %d bytes left in the WAL", n)
	}
	sum := fileSum(t, path)

	_, err := openSQLite(context.Background(), path, Options{})
	if !errors.Is(err, schema.ErrTooNew) {
		t.Fatalf("Open of a newer database: %v, want schema.ErrTooNew", err)
	}
	if want := fmt.Sprintf("version %d", latestSQLite(t)+1); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("message %q does not name the file and %q", err, want)
	}
	if fileSum(t, path) != sum {
		t.Fatal("the refused database file changed")
	}
	if n := walSize(t, path); n != 0 {
		t.Fatalf("the refused open left %d bytes in the WAL", n)
	}
}

// A file that is not a database, or whose header is damaged, is refused with
// an error that says so, and is not modified.
func TestOpenNotADatabase(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, bytes.Repeat([]byte("this is not a database\n"), 200), 0o600); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, "damaged.db")
	s := openAt(t, damaged, lease.SystemClock{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(damaged, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("garbage garbage!"), 0); err != nil { // the 16-byte magic header
		t.Fatal(err)
	}
	f.Close()
	for _, path := range []string{text, damaged} {
		sum := fileSum(t, path)
		_, err := openSQLite(context.Background(), path, Options{})
		if err == nil || !strings.Contains(err.Error(), "not a graph-engineering database or is damaged") || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want a clear not-a-database error naming the file", filepath.Base(path), err)
		}
		if fileSum(t, path) != sum {
			t.Errorf("%s: the file was modified", filepath.Base(path))
		}
	}
}

// Regression: a newer database in rollback-journal mode (a VACUUM INTO copy,
// say) was switched to WAL mode by the writer's connection before the
// version check refused it, so the refused file changed. It is now refused
// before anything writes to it.
func TestOpenRefusesNewerSchemaWithoutChangingJournalMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openAt(t, path, lease.NewManualClock(t0))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, path)
	mustExec(t, raw, `PRAGMA journal_mode = DELETE`)
	mustExec(t, raw, `UPDATE schema_version SET version = ?`, latestSQLite(t)+1)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := fileSum(t, path)
	if _, err := openSQLite(context.Background(), path, Options{}); !errors.Is(err, schema.ErrTooNew) {
		t.Fatalf("Open: %v, want schema.ErrTooNew", err)
	}
	if fileSum(t, path) != sum {
		t.Fatal("the refused database file changed (its journal mode was switched)")
	}
}

// Another program's SQLite database is refused rather than having the
// store's tables added to it, and it is left unchanged.
func TestOpenRefusesForeignDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	raw := rawDB(t, path)
	mustExec(t, raw, `CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)`)
	mustExec(t, raw, `INSERT INTO notes (body) VALUES ('keep me')`)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := fileSum(t, path)
	_, err := openSQLite(context.Background(), path, Options{})
	if !errors.Is(err, schema.ErrForeign) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of another program's database: %v, want schema.ErrForeign naming the file", err)
	}
	if fileSum(t, path) != sum {
		t.Fatal("the foreign database file changed")
	}
}

// latestSQLite is the newest version of the SQLite driver's series.
func latestSQLite(t *testing.T) int {
	t.Helper()
	s, err := tgsqlite.Schema()
	if err != nil {
		t.Fatal(err)
	}
	return s.Latest()
}
