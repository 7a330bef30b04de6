package taskgraph

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// Drain answers parked claim-next calls at once with ok false and Draining,
// a later claim-next that finds nothing does not wait, and everything else
// (a live lease, new writes, a claim that finds a task) runs on: nothing is
// lost until Close.
func TestDrainAnswersParkedClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	live := b.claim(t, "holder", b.create(t, "wf", "held").TaskID, time.Minute)
	out := make(chan parkedResult, 4)
	var wg sync.WaitGroup
	parkWaiters(t, b.s, b.ctx, 2, "", out, &wg)
	parkWaiters(t, b.s, b.ctx, 1, "wf", out, &wg)
	if got := b.s.Waiters(); got != 3 {
		t.Fatalf("Waiters = %d before Drain, want 3", got)
	}
	if b.s.Draining() {
		t.Fatal("Draining before Drain")
	}
	b.s.Drain()
	b.s.Drain() // idempotent
	for range 3 {
		r := testwait.Recv(t, "a parked claim-next answering after Drain", out)
		if r.err != nil || r.ok || !r.c.Draining {
			t.Fatalf("a parked claim-next after Drain got ok=%v draining=%v err=%v, want ok false, draining, no error", r.ok, r.c.Draining, r.err)
		}
	}
	wg.Wait()
	if got := b.s.Waiters(); got != 0 {
		t.Fatalf("Waiters = %d after Drain, want 0", got)
	}
	// A claim-next with a wait that finds nothing answers at once: were it
	// to park, it would answer only after MaxClaimWait, without Draining.
	c, ok, err := b.s.Claim(b.ctx, ClaimRequest{Owner: "late", Wait: MaxClaimWait})
	if err != nil || ok || !c.Draining {
		t.Fatalf("claim-next with a wait after Drain: ok=%v draining=%v err=%v, want ok false, draining", ok, c.Draining, err)
	}
	// Writes run on: the live lease heartbeats and completes, a create
	// lands, and a claim-next that finds it claims it.
	if _, err := b.s.Heartbeat(b.ctx, holder(live), time.Minute); err != nil {
		t.Fatalf("heartbeat after Drain: %v", err)
	}
	if _, err := b.s.Complete(b.ctx, holder(live), json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatalf("complete after Drain: %v", err)
	}
	b.wantState(t, live.Task.TaskID, StateCompleted)
	next := b.create(t, "wf", "after")
	c, ok, err = b.s.Claim(b.ctx, ClaimRequest{Owner: "late", Wait: MaxClaimWait, Lease: time.Minute})
	if err != nil || !ok || c.Task.TaskID != next.TaskID || c.Draining {
		t.Fatalf("claim-next after Drain with a ready task: ok=%v task=%s draining=%v err=%v, want %s", ok, c.Task.TaskID, c.Draining, err, next.TaskID)
	}
}
