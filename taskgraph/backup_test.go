package taskgraph

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

func TestBackupIsAConsistentDatabase(t *testing.T) {
	b := setup(t)
	a := b.create(t, "wf", "a")
	b.create(t, "wf", "b", "a")
	c := b.claim(t, "w", a.TaskID, 0)
	if _, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "backup.db")
	if err := b.drv.Backup(b.ctx, dest); err != nil {
		t.Fatal(err)
	}
	if err := b.drv.Backup(b.ctx, dest); !errors.Is(err, tgsqlite.ErrBackupExists) {
		t.Fatalf("second backup to the same file: %v", err)
	}
	restored, err := openSQLite(b.ctx, dest, Options{Clock: b.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	got, err := restored.Task(b.ctx, a.TaskID)
	if err != nil || got.State != StateCompleted || string(got.Result) != `{"x":1}` {
		t.Fatalf("restored task: %+v %v", got, err)
	}
	if _, err := restored.VerifyHistory(b.ctx); err != nil {
		t.Fatalf("restored history: %v", err)
	}
	if fingerprint(t, dest) != fingerprint(t, b.path) {
		t.Fatal("the backup differs from the database")
	}
}
