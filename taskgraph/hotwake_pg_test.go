package taskgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/idempotency"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// A claim-next that rides with a completion the batch refuses claims
// nothing, yet the batch's claim scan locked a task for it (FOR UPDATE
// SKIP LOCKED). A claim-next of another batch that passed over that task
// meanwhile, found nothing and parked, must be woken when the first batch
// commits: nothing else about the task changed, and without the wake it
// would sleep until its wait ran out (hotTx: the claims that claim
// nothing wake waiters for the candidates left unclaimed).
//
// Staged on PostgreSQL, where two batches run at once: each batch of
// interest is held in its last round by a transaction outside the store
// that inserted, uncommitted, the row under which the batch keeps a
// request id's answer. With both batches of the lane held, the
// operations submitted next wait together and go in one batch (A: the
// refused completion with its claim-next, and a claim-next with a request
// id, held in turn). A claim-next with a wait (B) then runs beside A,
// passes over the two tasks A's scan locked, and parks; A is let go, and
// its commit must deliver a wake (waitq.Queue.Delivered) before its
// callers are answered.
//
// The same holds for a claim-next found in the batch's first round to be
// a replay (its request id's answer kept): it is answered from the kept
// answer, and the task its scan locked is left.
func TestUnclaimedCandidateWakesParkedClaimPostgres(t *testing.T) {
	t.Parallel()
	t.Run("RefusedCompletion", func(t *testing.T) {
		t.Parallel()
		testUnclaimedCandidateWakes(t, false)
	})
	t.Run("Replay", func(t *testing.T) {
		t.Parallel()
		testUnclaimedCandidateWakes(t, true)
	})
}

// testUnclaimedCandidateWakes stages TestUnclaimedCandidateWakesParkedClaimPostgres
// with, as the operation whose claim-next claims nothing, the replay of a
// claim-next that took r (replay), or the completion of r under a token
// that is not its claim's.
func testUnclaimedCandidateWakes(t *testing.T, replay bool) {
	ctx := context.Background()
	url := pgtest.URL(t)
	drv, err := tgpostgres.Open(ctx, url, tgpostgres.Options{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenDriver(ctx, drv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	var nodes []NodeSpec
	for _, n := range []string{"p1", "p2", "r", "u", "t"} {
		nodes = append(nodes, NodeSpec{NodeID: n, Payload: json.RawMessage(`{}`)})
	}
	if _, err := s.CreateWorkflow(ctx, "w", nodes); err != nil {
		t.Fatal(err)
	}
	holders := map[string]lease.Holder{}
	claimR := ClaimRequest{Owner: "w1", WorkflowID: "w", Lease: 10 * time.Minute}
	for _, n := range []string{"p1", "p2", "r"} {
		if n == "r" && replay {
			c, ok, err := s.Claim(WithRequestID(ctx, "rx"), claimR)
			if err != nil || !ok || c.Task.NodeID != "r" {
				t.Fatalf("claim-next rx: ok=%v err=%v task %q, want r", ok, err, c.Task.NodeID)
			}
			continue
		}
		tk, err := s.TaskByNode(ctx, "w", n)
		if err != nil {
			t.Fatal(err)
		}
		c, ok, err := s.Claim(ctx, ClaimRequest{TaskID: tk.TaskID, Owner: "w1", Lease: 10 * time.Minute})
		if err != nil || !ok {
			t.Fatalf("claim %s: ok=%v err=%v", n, ok, err)
		}
		holders[n] = holder(c)
	}

	mon, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mon.Close(context.Background()) })
	// lockWaiters counts the store's inserts of kept answers that wait
	// for a hold.
	lockWaiters := func() int {
		var n int
		if err := mon.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
			AND query LIKE 'INSERT INTO requests %'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// hold inserts, uncommitted, the row of request id id of owner: the
	// store's insert of that id's answer waits for it, and goes ahead
	// once the returned function rolls it back.
	hold := func(owner, id string) func() {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO requests (request_key, principal, op, args, answer, created_at_ms) VALUES ($1, '', 'held', '{}', '{}', 0)`,
			idempotency.Key("", owner, id)); err != nil {
			t.Fatal(err)
		}
		done := false
		let := func() {
			if !done {
				done = true
				if err := tx.Rollback(ctx); err != nil {
					t.Errorf("roll back the hold of %s: %v", id, err)
				}
				conn.Close(ctx)
			}
		}
		t.Cleanup(let)
		return let
	}
	letP1, letP2, letA := hold("w1", "hp1"), hold("w1", "hp2"), hold("w1", "c2")

	type answer struct {
		c   Claimed
		ok  bool
		err error
	}
	heartbeat := func(n, id string) chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := s.Heartbeat(WithRequestID(ctx, id), holders[n], 10*time.Minute)
			ch <- err
		}()
		return ch
	}
	// The lane's two batches, each a heartbeat held keeping its answer.
	p1 := heartbeat("p1", "hp1")
	testwait.For(t, "the first heartbeat's batch to wait for its hold", func() bool { return lockWaiters() == 1 })
	p2 := heartbeat("p2", "hp2")
	testwait.For(t, "the second heartbeat's batch to wait for its hold", func() bool { return lockWaiters() == 2 })

	// A's operations wait together: the refused completion of r (a token
	// that is not its claim's) with its claim-next, or the replay of the
	// claim-next that took r; and a claim-next that keeps its answer
	// under c2.
	x := make(chan error, 1)
	go func() {
		if replay {
			c, ok, err := s.Claim(WithRequestID(ctx, "rx"), claimR)
			if err == nil && (!ok || c.Task.NodeID != "r") {
				err = fmt.Errorf("replayed claim-next rx: ok=%v task %q, want r", ok, c.Task.NodeID)
			}
			x <- err
			return
		}
		stale := holders["r"]
		stale.Token = "not-the-claim-token"
		_, _, _, err := s.CompleteAndClaim(ctx, stale, json.RawMessage(`1`), ClaimRequest{Owner: "w1", WorkflowID: "w", Lease: 10 * time.Minute})
		if !errors.Is(err, ErrStaleClaim) {
			err = fmt.Errorf("completion with another token: %v, want ErrStaleClaim", err)
		} else {
			err = nil
		}
		x <- err
	}()
	c2 := make(chan answer, 1)
	go func() {
		c, ok, err := s.Claim(WithRequestID(ctx, "c2"), ClaimRequest{Owner: "w1", WorkflowID: "w", Lease: 10 * time.Minute})
		c2 <- answer{c, ok, err}
	}()
	want := 3 // the completion, its claim-next and c2
	if replay {
		want = 2 // the replay and c2
	}
	testwait.For(t, "the operations of batch A to wait for a batch", func() bool { return s.hot.Queued() == want })
	letP1()
	if err := testwait.Recv(t, "the first heartbeat", p1); err != nil {
		t.Fatalf("heartbeat p1: %v", err)
	}
	// A ran its claim scan (u and t locked, one for each claim-next) and
	// waits for its hold.
	testwait.For(t, "batch A to wait for its hold", func() bool { return s.hot.Queued() == 0 && lockWaiters() == 2 })
	select {
	case err := <-x:
		t.Fatalf("the operation whose claim-next claims nothing was answered (%v) before its batch committed", err)
	default:
	}

	// B passes over u and t, which A holds, and parks.
	attempts := s.claimAttempts.Load()
	b := make(chan answer, 1)
	go func() {
		c, ok, err := s.Claim(ctx, ClaimRequest{Owner: "w2", WorkflowID: "w", Lease: 10 * time.Minute, Wait: MaxClaimWait})
		b <- answer{c, ok, err}
	}()
	testwait.For(t, "claim-next B to wait for a batch", func() bool { return s.hot.Queued() == 1 })
	letP2()
	if err := testwait.Recv(t, "the second heartbeat", p2); err != nil {
		t.Fatalf("heartbeat p2: %v", err)
	}
	testwait.For(t, "claim-next B's first attempt", func() bool { return s.claimAttempts.Load() > attempts })
	select {
	case got := <-b:
		t.Fatalf("claim-next B answered (%+v) while A held u and t: the test did not stage the pass-over", got)
	default:
	}

	// A's commit wakes B before A's callers are answered (Store.committed
	// runs before the answers): nothing else wakes B, which without that
	// wake would claim t only when its wait ran out.
	wakes := s.notify.Delivered()
	letA()
	if err := testwait.Recv(t, "the operation whose claim-next claims nothing", x); err != nil {
		t.Fatal(err)
	}
	if got := s.notify.Delivered(); got == wakes {
		t.Fatal("batch A committed without waking the parked claim-next B: its scan locked t for a claim-next that claimed nothing, and left it")
	}
	if got := testwait.Recv(t, "claim-next c2", c2); got.err != nil || !got.ok || got.c.Task.NodeID != "u" {
		t.Fatalf("claim-next c2: %+v, want u", got)
	}
	got := testwait.Recv(t, "claim-next B", b)
	if got.err != nil || !got.ok || got.c.Task.NodeID != "t" {
		t.Fatalf("claim-next B: ok=%v err=%v task %q; want t", got.ok, got.err, got.c.Task.NodeID)
	}
}
