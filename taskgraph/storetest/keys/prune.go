package keys

import (
	"encoding/json"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// The rows of keys whose tasks are never claimed (cancelled first, or
// pruned with their workflow) go with the sweeper's pass
// (Store.PruneIdleKeys); so does a key without a limit whose task is
// claimed (no count is kept while uncapped: its row holds nothing a
// missing row does not say); a key with a limit or a ready task keeps
// its row, and a key pruned so comes back with its next claim.
func testKeyRowsNeverClaimedPruned(t *testing.T, h Harness) {
	e := setup(t, h)
	rows := func(key string) int64 {
		return e.Count(t, `SELECT COUNT(*) FROM concurrency_keys WHERE key = ?`, key)
	}
	cancelled := e.createKeyed(t, "a", "c0", "cancelled", nil)
	e.createKeyed(t, "old", "p0", "pruned", nil)
	e.createKeyed(t, "a", "r0", "ready", nil)
	e.createKeyed(t, "a", "l0", "limited", &tg.KeyLimit{MaxClaimed: 1})
	held := e.createKeyed(t, "b", "h0", "held", nil)
	c := e.Claim(t, "w", held.TaskID, 15*time.Minute)
	if _, changed, err := e.S.CancelTask(e.Ctx, cancelled.TaskID, "not needed"); err != nil || !changed {
		t.Fatalf("cancel c0: changed=%v err=%v", changed, err)
	}
	if _, err := e.S.AbortWorkflow(e.Ctx, "old", alice); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(time.Minute)
	if r, err := e.S.Prune(e.Ctx, e.Clock.Now()); err != nil || len(r.Workflows) != 1 {
		t.Fatalf("prune workflow old: %+v, %v", r, err)
	}
	// No claim of theirs ended, so nothing pruned them yet.
	for _, k := range []string{"cancelled", "pruned"} {
		if n := rows(k); n != 1 {
			t.Fatalf("key %s before the sweep: %d rows, want 1", k, n)
		}
	}
	n, err := e.S.PruneIdleKeys(e.Ctx)
	if err != nil || n != 3 {
		t.Fatalf("PruneIdleKeys = %d, %v; want 3 (cancelled, pruned, held)", n, err)
	}
	for k, want := range map[string]int64{"cancelled": 0, "pruned": 0, "ready": 1, "limited": 1, "held": 0} {
		if n := rows(k); n != want {
			t.Errorf("key %s after the sweep: %d rows, want %d", k, n, want)
		}
	}
	if n, err := e.S.PruneIdleKeys(e.Ctx); err != nil || n != 0 {
		t.Fatalf("a second PruneIdleKeys = %d, %v; want 0", n, err)
	}
	// The held key's claim runs on and ends as ever, and a pruned key's
	// next task is claimed and counted.
	if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	e.createKeyed(t, "a", "c1", "cancelled", nil)
	c1 := e.Claim(t, "w", e.taskOf(t, "a", "c1"), time.Minute)
	e.wantClaimedOfKey(t, "cancelled", 1)
	if _, err := e.S.Complete(e.Ctx, holder(c1), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	e.Verify(t)

	// The server's store runs the pass on its own: the sweeper's first
	// round is at Open.
	e.createKeyed(t, "a", "c2", "swept", nil)
	if _, changed, err := e.S.CancelTask(e.Ctx, e.taskOf(t, "a", "c2"), "not needed"); err != nil || !changed {
		t.Fatalf("cancel c2: changed=%v err=%v", changed, err)
	}
	e.DB.Open(t, tg.Options{Clock: e.Clock, Sweep: true})
	testwait.For(t, "the sweeper to prune key swept", func() bool { return rows("swept") == 0 })
	if n := rows("limited"); n != 1 {
		t.Fatalf("key limited after the sweeper: %d rows, want 1", n)
	}
}

// taskOf returns the id of node of workflow wf.
func (e *env) taskOf(t *testing.T, wf, node string) string {
	t.Helper()
	tk, err := e.S.TaskByNode(e.Ctx, wf, node)
	if err != nil {
		t.Fatalf("task %s/%s: %v", wf, node, err)
	}
	return tk.TaskID
}
