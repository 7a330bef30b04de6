package tgpostgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// A batch that ends a claim of key k2 holds k2's row (the trigger that
// gives the slot back); its candidate of key k1, which comes before k2 and
// whose row another transaction holds, it passes over rather than wait for
// out of key order (two such batches could wait for each other):
// CompleteAndClaim answers with nothing claimed while k1 is still held,
// having waited for no lock. The worker's claim-next with a wait, which
// holds no key, waits for k1 in key order and takes the task once the
// holder commits.
func TestBatchPassesOverKeyBeforeOneItHolds(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s, _ := openStore(t, url)
	op := tg.Operator{Name: "op", Reason: "test"}
	for _, k := range []string{"k1", "k2"} {
		if _, err := s.SetKeyLimit(ctx, k, tg.KeyLimit{MaxClaimed: 5}, op); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateWorkflow(ctx, "w", []tg.NodeSpec{
		{NodeID: "a", Payload: json.RawMessage(`{}`), ConcurrencyKey: "k2"},
		{NodeID: "b", Payload: json.RawMessage(`{}`), ConcurrencyKey: "k1"},
	}); err != nil {
		t.Fatal(err)
	}
	a, err := s.TaskByNode(ctx, "w", "a")
	if err != nil {
		t.Fatal(err)
	}
	ca, ok, err := s.Claim(ctx, tg.ClaimRequest{TaskID: a.TaskID, Owner: "w1", Lease: time.Minute})
	if err != nil || !ok {
		t.Fatalf("claim a: ok=%v err=%v", ok, err)
	}

	// Another transaction holds k1's row, as a batch claiming b would.
	other, err := tgpostgres.Open(ctx, url, tgpostgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	held, release, holderDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		holderDone <- other.Write(ctx, func(tx tgdriver.Tx) error {
			if _, ok, err := tx.LockKey(ctx, "k1"); err != nil || !ok {
				t.Errorf("LockKey(k1): ok=%v err=%v", ok, err)
			}
			close(held)
			<-release
			return nil
		})
	}()
	testwait.Recv(t, "the other transaction's lock of k1", held)
	released := false
	releaseHolder := func() {
		if !released {
			released = true
			close(release)
			if err := testwait.Recv(t, "the holder's commit", holderDone); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(releaseHolder)

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	lockWaiters := func() int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, _, ok, err := s.CompleteAndClaim(ctx, stenv.Holder(ca), json.RawMessage(`1`), tg.ClaimRequest{Lease: time.Minute})
		done <- result{ok, err}
	}()
	var got result
	testwait.For(t, "CompleteAndClaim to answer or to wait for a lock", func() bool {
		select {
		case got = <-done:
			return true
		default:
		}
		if n := lockWaiters(); n > 0 {
			t.Fatalf("CompleteAndClaim waits for a lock (%d waiting) while it holds k2: it must pass over b, whose key k1 comes first", n)
		}
		return false
	})
	if got.err != nil || got.ok {
		t.Fatalf("CompleteAndClaim while k1 is held: ok=%v err=%v; want a's completion and nothing claimed", got.ok, got.err)
	}

	// The worker claims with a wait, holding no key: it waits for k1 in
	// key order, and takes b once the holder commits.
	claimed := make(chan tg.Claimed, 1)
	go func() {
		c, ok, err := s.Claim(ctx, tg.ClaimRequest{Owner: "w1", Lease: time.Minute, Wait: 30 * time.Second})
		if err != nil || !ok {
			t.Errorf("claim-next with a wait: ok=%v err=%v", ok, err)
		}
		claimed <- c
	}()
	testwait.For(t, "the claim-next to wait for k1", func() bool { return lockWaiters() > 0 })
	releaseHolder()
	if c := testwait.Recv(t, "the claim of b", claimed); c.Task.NodeID != "b" {
		t.Fatalf("claim-next after k1 was let go took %q, want b", c.Task.NodeID)
	}
}
