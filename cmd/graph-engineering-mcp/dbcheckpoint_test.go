package main

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// db checkpoint beside a store and a reader holding a read transaction:
// it keeps the WAL and says so without waiting; the store keeps writing;
// with the reader gone, it empties the WAL.
func TestDBCheckpoint(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	ctx := context.Background()
	rdb, err := sql.Open("sqlite3", "file:"+e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	reader, err := rdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := reader.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.CreateTask(ctx, "later", taskgraph.NodeSpec{NodeID: "x"}); err != nil { // after the reader's snapshot
		t.Fatal(err)
	}
	r := e.cli("", "db", "checkpoint").want(t, exitOK)
	if !strings.Contains(r.stdout, "database:   "+e.path+"\n") || !strings.Contains(r.stdout, "WAL kept (") || !strings.Contains(r.stdout, "does not wait") {
		t.Fatalf("beside a reader:\n%s", r.stdout)
	}
	var out struct {
		Truncated bool
		WAL       int64 `json:"wal_bytes"`
	}
	decodeJSON(t, e.cli("", "db", "checkpoint", "--json").want(t, exitOK).stdout, &out)
	if out.Truncated || out.WAL == 0 {
		t.Fatalf("JSON beside a reader: %+v", out)
	}
	if _, err := e.s.CreateTask(ctx, "later", taskgraph.NodeSpec{NodeID: "y"}); err != nil {
		t.Fatalf("write after db checkpoint: %v", err)
	}
	if _, err := reader.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	r = e.cli("", "db", "checkpoint").want(t, exitOK)
	if !strings.Contains(r.stdout, "WAL emptied") {
		t.Fatalf("with no reader:\n%s", r.stdout)
	}
	if fi, err := os.Stat(e.path + "-wal"); err != nil || fi.Size() != 0 {
		t.Fatalf("WAL after db checkpoint: %v %v", fi, err)
	}
	decodeJSON(t, e.cli("", "db", "checkpoint", "--json").want(t, exitOK).stdout, &out)
	if !out.Truncated || out.WAL != 0 {
		t.Fatalf("JSON with no reader: %+v", out)
	}
	if got := e.task(f.tasks["fetch"].TaskID).State; got != taskgraph.StateCompleted {
		t.Fatalf("after db checkpoint the store reads fetch as %s, want completed", got)
	}
}
