package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/schema"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Checkpoint, Open and OpenReadOnly refuse what is not a graph-engineering
// database without creating or changing it.
func TestRefuseWhatIsNotADatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, err := Checkpoint(ctx, missing); !errors.Is(err, ErrNoDatabase) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Checkpoint created %s", missing)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Checkpoint(ctx, empty); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := OpenReadOnly(ctx, empty, Options{}); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("OpenReadOnly of an empty file: %v", err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite3", "file:"+foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Checkpoint(ctx, foreign); !errors.Is(err, schema.ErrForeign) {
		t.Fatalf("Checkpoint of another program's database: %v", err)
	}
	if _, err := Open(ctx, foreign, Options{}); !errors.Is(err, schema.ErrForeign) {
		t.Fatalf("Open of another program's database: %v", err)
	}
	after, err := os.ReadFile(foreign)
	if err != nil || string(after) != string(before) {
		t.Fatalf("a refused open changed %s (%v)", foreign, err)
	}
	if _, err := os.Stat(foreign + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused open turned %s to WAL mode (%v)", foreign, err)
	}
}

// Checkpoint beside an open driver with no reader empties the WAL, and the
// driver goes on writing.
func TestCheckpointTruncatesWhenIdle(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "a")); return nil })
	res, err := Checkpoint(ctx, d.path)
	if err != nil || !res.Truncated || res.WALBytes != 0 || res.CopiedFrames != res.WALFrames {
		t.Fatalf("Checkpoint with no reader: %+v %v; want the WAL emptied", res, err)
	}
	write(t, d, func(tx tgdriver.Tx) error { addTask(t, tx, newTask("wf", "b")); return nil })
	if ts, err := d.Reads().ListTasks(ctx, tgdriver.ListFilter{}); err != nil || len(ts) != 2 {
		t.Fatalf("%d tasks after the checkpoint (%v), want 2", len(ts), err)
	}
}
