package tgsqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver/drivertest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// sqliteHarness opens drivers on a database file in the test's temporary
// folder; the contract's raw SQL goes through a connection of its own, as
// another process with the file would.
type sqliteHarness struct{}

func (sqliteHarness) Name() string { return "sqlite" }

// Parallel leaves the bound to go test's -parallel: a database is a file.
func (sqliteHarness) Parallel() int { return 0 }

func (sqliteHarness) NewDatabase(t testing.TB) drivertest.Database {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return &sqliteDatabase{SQLDB: drivertest.SQLDB{DB: db}, path: path}
}

type sqliteDatabase struct {
	drivertest.SQLDB
	path string
}

func (d *sqliteDatabase) Open(t testing.TB) tgdriver.Driver {
	t.Helper()
	// A short watch interval: Changes reports another process's write soon.
	drv, err := tgsqlite.Open(context.Background(), d.path, tgsqlite.Options{WatchInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open %s: %v", d.path, err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

func (d *sqliteDatabase) OpenReadOnly(t testing.TB) tgdriver.Driver {
	t.Helper()
	drv, err := tgsqlite.OpenReadOnly(context.Background(), d.path, tgsqlite.Options{})
	if err != nil {
		t.Fatalf("OpenReadOnly %s: %v", d.path, err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

// TestDriverContract runs the drivers' common contract on SQLite.
func TestDriverContract(t *testing.T) { drivertest.Run(t, sqliteHarness{}) }
