package tgpostgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// The hot lane holds a lone caller back while a batch runs, so that it goes
// with the next batch rather than paying a commit of its own (hotpace); a
// batch that stalls must not hold it for longer than the pacer's hold. Here
// one worker's heartbeat is stuck in a batch waiting for its task's row,
// which another transaction locks: another worker's heartbeat is still
// answered, and keeps its lease, while the row stays locked.
func TestHeartbeatIsNotHeldBehindAStalledBatch(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	d, err := tgpostgres.Open(ctx, url, tgpostgres.Options{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tg.OpenDriver(ctx, d, tg.Options{Sweep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateWorkflow(ctx, "stall", []tg.NodeSpec{{NodeID: "a"}, {NodeID: "b"}}); err != nil {
		t.Fatal(err)
	}
	holders := map[string]lease.Holder{}
	for _, owner := range []string{"wa", "wb"} {
		c, ok, err := s.Claim(ctx, tg.ClaimRequest{Owner: owner, Lease: time.Minute})
		if err != nil || !ok {
			t.Fatalf("claim for %s: ok=%v err=%v", owner, ok, err)
		}
		holders[owner] = lease.Holder{TaskID: c.Task.TaskID, Owner: owner, Generation: c.Lease.Generation, Token: c.Lease.Token}
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	locker, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback()
	if _, err := locker.Exec(`SELECT 1 FROM tasks WHERE task_id = $1 FOR UPDATE`, holders["wa"].TaskID); err != nil {
		t.Fatal(err)
	}
	stuck := make(chan error, 1)
	go func() {
		_, err := s.Heartbeat(ctx, holders["wa"], time.Minute)
		stuck <- err
	}()
	// The stuck batch waits for the row lock.
	testwait.For(t, "the first heartbeat's batch to wait for the locked row", func() bool {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	answered := make(chan error, 1)
	go func() {
		_, err := s.Heartbeat(ctx, holders["wb"], time.Minute)
		answered <- err
	}()
	if err := testwait.Recv(t, "the second heartbeat while the first batch is stalled", answered); err != nil {
		t.Fatalf("heartbeat of a live claim beside a stalled batch: %v", err)
	}
	select {
	case err := <-stuck:
		t.Fatalf("the first heartbeat returned while its row was locked: %v", err)
	default:
	}
	if err := locker.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := testwait.Recv(t, "the stalled heartbeat once the row is free", stuck); err != nil {
		t.Fatalf("the stalled heartbeat: %v", err)
	}
}
