package taskgraph

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

// An old copy of the database restored over a newer one verifies on its
// own, but does not extend an anchor taken from the newer one.
func TestAnchorCatchesRestoredBackup(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/tasks.db"
	clock := lease.NewManualClock(t0)
	open := func() *Store {
		t.Helper()
		s, err := openSQLite(ctx, path, Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	b := &bundle{s: open(), clock: clock, path: path, ctx: ctx}
	b.create(t, "wf", "a")
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("Close left a WAL: the copy would not be the whole database")
	}
	// The newer database: more work, one more workflow, a task completed.
	b.s = open()
	b.create(t, "wf", "b")
	c := b.claim(t, "w", b.create(t, "wf2", "x").TaskID, 0)
	if _, err := b.s.Complete(ctx, holder(c), []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	anchor, err := b.s.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.s.CheckAnchor(ctx, anchor); err != nil {
		t.Fatalf("a database does not extend its own head: %v", err)
	}
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	// Restore the old copy over it.
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	b.s = open()
	defer b.s.Close()
	b.verify(t)
	err = b.s.CheckAnchor(ctx, anchor)
	if !errors.Is(err, ErrAnchorNotExtended) || !strings.Contains(err.Error(), "the audit chain has 2 entries, the anchor names entry 3") {
		t.Fatalf("CheckAnchor after restoring an old copy: %v", err)
	}
	// Working on the old copy does not make it extend the anchor.
	b.create(t, "wf3", "z")
	if err := b.s.CheckAnchor(ctx, anchor); !errors.Is(err, ErrAnchorNotExtended) {
		t.Fatalf("CheckAnchor after new work on the old copy: %v", err)
	}
}
