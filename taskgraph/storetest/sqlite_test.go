package storetest_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3" // the "sqlite3" driver for the harness's own connection

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/keys"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/sqldb"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// sqliteDatabase is a database file in a test's temporary folder: stores
// open it with sqlitestore.Open, and the suite's raw SQL goes through a second
// connection of its own, as someone with access to the file would.
type sqliteDatabase struct {
	sqldb.DB
	path string
}

func newSQLiteDatabase(t testing.TB) storetest.Database {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return &sqliteDatabase{
		DB:   sqldb.DB{DB: db, TablesQuery: `SELECT name FROM sqlite_master WHERE type = 'table'`},
		path: path,
	}
}

// Open opens a store on the file and closes it when t ends.
func (d *sqliteDatabase) Open(t testing.TB, opts tg.Options) *tg.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), d.path, opts, tgsqlite.Options{})
	if err != nil {
		t.Fatalf("Open %s: %v", d.path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestSQLite(t *testing.T) {
	storetest.Run(t, storetest.Harness{Name: "sqlite", NewDatabase: newSQLiteDatabase})
}

// BenchmarkClaimPastRateHeldKey runs keys.BenchClaimPastRateHeldKey on a
// SQLite file (synchronous=FULL, the default).
func BenchmarkClaimPastRateHeldKey(b *testing.B) {
	s, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "tasks.db"), tg.Options{}, tgsqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	keys.BenchClaimPastRateHeldKey(b, s)
}
