package sqlitestore

import (
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// A store on a file, then a read-only store on it with its driver: the
// write is there, the read-only store refuses writes, and the driver's
// SQLite-only operations work on the store's database.
func TestOpenThenReadOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "tasks.db")
	logs := &testwait.Buffer{}
	s, err := Open(ctx, path, taskgraph.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}, tgsqlite.Options{Sync: tgsqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTask(ctx, "wf", taskgraph.NodeSpec{NodeID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "migrated") {
		t.Errorf("the driver's log lines did not reach the store's logger:\n%s", logs)
	}
	ro, d, err := OpenReadOnlyDriver(ctx, path, taskgraph.Options{}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ts, err := ro.ListTasks(ctx, taskgraph.ListFilter{WorkflowID: "wf"}); err != nil || len(ts) != 1 {
		t.Fatalf("ListTasks on the read-only store: %v %v", ts, err)
	}
	if _, err := ro.CreateTask(ctx, "wf", taskgraph.NodeSpec{NodeID: "b"}); !errors.Is(err, taskgraph.ErrReadOnlyStore) {
		t.Fatalf("a write on the read-only store: %v, want ErrReadOnlyStore", err)
	}
	if res, err := d.Check(ctx); err != nil || !res.OK() || res.Checkpointed {
		t.Fatalf("Check on the read-only driver: %+v %v", res, err)
	}
}

// Errors are the driver's: a bad option, and no database for a reader.
func TestErrorsAreTheDrivers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	if _, err := Open(ctx, "", taskgraph.Options{}, tgsqlite.Options{}); !errors.Is(err, tgsqlite.ErrInvalidOption) {
		t.Errorf("empty path: %v, want tgsqlite.ErrInvalidOption", err)
	}
	if _, err := Open(ctx, filepath.Join(dir, "x.db"), taskgraph.Options{}, tgsqlite.Options{Sync: "off"}); !errors.Is(err, tgsqlite.ErrInvalidOption) || !strings.Contains(err.Error(), "sync") {
		t.Errorf("unknown sync mode: %v, want tgsqlite.ErrInvalidOption naming sync", err)
	}
	missing := filepath.Join(dir, "missing.db")
	if _, err := OpenReadOnly(ctx, missing, taskgraph.Options{}, tgsqlite.Options{}); !errors.Is(err, tgsqlite.ErrNoDatabase) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only on a missing file: %v, want tgsqlite.ErrNoDatabase", err)
	}
}
