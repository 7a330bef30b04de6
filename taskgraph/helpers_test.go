package taskgraph

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type bundle struct {
	s     *Store
	clock *lease.ManualClock
	path  string
	ctx   context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, Options{})
}

func setupWith(t *testing.T, opts Options) *bundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	clock := lease.NewManualClock(t0)
	if opts.Clock == nil {
		opts.Clock = clock
	}
	ctx := context.Background()
	s, err := Open(ctx, path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &bundle{s: s, clock: clock, path: path, ctx: ctx}
}

func (b *bundle) create(t *testing.T, wf, node string, deps ...string) Task {
	t.Helper()
	c, err := b.s.CreateTask(b.ctx, wf, NodeSpec{NodeID: node, DependsOn: deps, Payload: json.RawMessage(fmt.Sprintf(`{"n":%q}`, node))})
	if err != nil {
		t.Fatalf("create %s/%s: %v", wf, node, err)
	}
	return c.Task
}

func (b *bundle) claim(t *testing.T, owner, taskID string, d time.Duration) Claimed {
	t.Helper()
	c, ok, err := b.s.Claim(b.ctx, ClaimRequest{Owner: owner, TaskID: taskID, Lease: d})
	if err != nil || !ok {
		t.Fatalf("claim %s by %s: ok=%v err=%v", taskID, owner, ok, err)
	}
	return c
}

func holder(c Claimed) lease.Holder {
	return lease.Holder{TaskID: c.Task.TaskID, Owner: c.Lease.Owner, Generation: c.Lease.Generation, Token: c.Lease.Token}
}

func (b *bundle) get(t *testing.T, id string) Task {
	t.Helper()
	tk, err := b.s.Task(b.ctx, id)
	if err != nil {
		t.Fatalf("Task(%s): %v", id, err)
	}
	return tk
}

func (b *bundle) wantState(t *testing.T, id string, want State) Task {
	t.Helper()
	tk := b.get(t, id)
	if tk.State != want {
		t.Fatalf("task %s (%s) is %s (%q), want %s", id, tk.NodeID, tk.State, tk.StatusMessage, want)
	}
	return tk
}

func (b *bundle) verify(t *testing.T) VerifyReport {
	t.Helper()
	rep, err := b.s.VerifyHistory(b.ctx)
	if err != nil {
		t.Fatalf("VerifyHistory: %v", err)
	}
	return rep
}

func wantStale(t *testing.T, err error, reason lease.Reason) {
	t.Helper()
	var se *lease.StaleClaimError
	if !errors.Is(err, ErrStaleClaim) || !errors.As(err, &se) || se.Reason != reason {
		t.Fatalf("got %v, want a stale claim with reason %q", err, reason)
	}
}

// fingerprint summarises everything the store holds, to show an operation
// left the database unchanged.
func fingerprint(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_query_only=on")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out string
	for _, q := range []string{
		`SELECT COUNT(*) || ':' || COALESCE(SUM(generation),0) || ':' || COALESCE(GROUP_CONCAT(state || updated_at_ms || COALESCE(result,'') || COALESCE(error,'') || attempts, ','), '') FROM tasks`,
		`SELECT COUNT(*) || ':' || COALESCE(MAX(hash), '') FROM events`,
		`SELECT COUNT(*) || ':' || COALESCE(GROUP_CONCAT(head_hash || task_count, ','), '') FROM workflows`,
		`SELECT COUNT(*) FROM edges`,
	} {
		var s string
		if err := db.QueryRow(q).Scan(&s); err != nil {
			t.Fatalf("fingerprint %q: %v", q, err)
		}
		out += s + "|"
	}
	return out
}

var alice = Operator{Name: "alice", Reason: "INC-42: the upstream API is back"}

func mustEvents(t *testing.T, b *bundle, id string) []Event {
	t.Helper()
	evs, err := b.s.TaskEvents(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// lastEvent returns the newest event of kind on task id.
func lastEvent(t *testing.T, b *bundle, id, kind string) Event {
	t.Helper()
	evs := mustEvents(t, b, id)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i]
		}
	}
	t.Fatalf("task %s has no %s event", id, kind)
	return Event{}
}

// rawScan runs one query on the SQLite database at path through a
// read-only connection of its own, behind the store's back, and scans its
// row into dest.
func rawScan(t *testing.T, path, query string, args []any, dest ...any) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(query, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}
