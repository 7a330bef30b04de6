package tgpostgres

import (
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestReplicasCountTheListenersOnTheDatabase: each driver's listener holds
// the replicas' advisory lock, so two drivers on one database count two,
// a read-only driver (no listener) is not counted, a driver on another
// database is not counted, and a replica that closes or loses its
// listener's connection drops out of the count.
func TestReplicasCountTheListenersOnTheDatabase(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	a := open(t, url, Options{ReplicaID: "replica-a"})
	if err := a.countReplicas(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.Replicas(); got != 1 {
		t.Fatalf("one replica counts %d", got)
	}
	b := open(t, url, Options{ReplicaID: "replica-b"})
	ro := open(t, url, Options{ReadOnly: true})
	elsewhere := open(t, pgtest.URL(t), Options{ReplicaID: "elsewhere"})
	// Open waits for the listener's lock, but at most AcquireTimeout:
	// wait for the count rather than trust that it is taken.
	for _, d := range []*Driver{a, b, ro} {
		waitReplicas(t, d, 2) // a and b; the read-only driver has no listener
	}
	if err := elsewhere.countReplicas(ctx); err != nil {
		t.Fatal(err)
	}
	if got := elsewhere.Replicas(); got != 1 {
		t.Errorf("a driver on another database counts %d replicas, want 1", got)
	}

	// A closed replica drops out; a listener whose connection is cut takes
	// the lock again when it reconnects. The server releases a session's
	// locks as its backend exits, after the client has gone: wait for the
	// count to follow.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, a, 1)
	c := raw(t, url)
	if _, err := c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Changes(): // the reconnected listener reports Unknown
	case <-ctx.Done():
		t.Fatal("the listener did not reconnect")
	}
	// a's new connection holds the lock again: a new replica counts two.
	d := open(t, url, Options{ReplicaID: "replica-d"})
	waitReplicas(t, d, 2)
}

// waitReplicas counts d's replicas until it counts want.
func waitReplicas(t *testing.T, d *Driver, want int) {
	t.Helper()
	ctx := testCtx(t)
	var b testwait.Backoff
	for {
		if err := d.countReplicas(ctx); err != nil {
			t.Fatal(err)
		}
		if d.Replicas() == want {
			return
		}
		if !b.Wait(ctx) {
			t.Fatalf("%s counts %d replicas, want %d", d.replicaID, d.Replicas(), want)
		}
	}
}
