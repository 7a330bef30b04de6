package taskgraph

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

// openServer opens the server's store (Sweep) on path with clock as both its
// wall clock and its monotonic source.
func openServer(t *testing.T, path string, clock *lease.ManualClock) *Store {
	t.Helper()
	s, err := openSQLite(context.Background(), path, Options{Clock: clock, Monotonic: clock, Sweep: true, ClockCheckInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Migration 0002 gives a claim made before it the lease duration it was set
// with (its expiry minus its last update), so it too is clamped correctly.
func TestLeaseMSBackfilledForClaimsBeforeTheMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	v1, err := os.ReadFile("tgsqlite/migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, raw, string(v1))
	mustExec(t, raw, `CREATE TABLE schema_version (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), version INTEGER NOT NULL, applied_at_ms INTEGER NOT NULL)`)
	mustExec(t, raw, `INSERT INTO schema_version VALUES (1, 1, 0)`)
	at := t0.UnixMilli()
	mustExec(t, raw, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('wf', ?, ?)`, at, at)
	mustExec(t, raw, `INSERT INTO tasks (seq, task_id, workflow_id, node_id, payload, depends_on, state, owner, generation, lease_expires_at_ms,
		attempts, max_attempts, unmet, created_at_ms, updated_at_ms) VALUES (1, '01KJMMA2G0000000000000000A', 'wf', 'n', '{}', '[]', 'claimed', 'w', 1, ?, 1, 3, 0, ?, ?)`,
		at+20000, at, at)
	raw.Close()

	clock := lease.NewManualClock(t0.Add(time.Second))
	s := openServer(t, path, clock)
	var ms int64
	_ = s
	rawScan(t, path, `SELECT lease_ms FROM tasks WHERE seq = 1`, nil, &ms)
	if ms != 20000 {
		t.Fatalf("lease_ms = %d, want 20000", ms)
	}
}
