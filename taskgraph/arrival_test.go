package taskgraph

import (
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// signalClock is a ManualClock that reports every reading on called, so a
// test knows when a store method has stamped its arrival.
type signalClock struct {
	*lease.ManualClock
	called chan struct{}
}

func (c *signalClock) Now() time.Time {
	now := c.ManualClock.Now() // read before signalling: the test moves the clock once signalled
	select {
	case c.called <- struct{}{}:
	default:
	}
	return now
}

// A heartbeat that arrives while the lease is live but waits behind another
// process's write lock until the clock has passed the expiry is judged at its
// arrival and succeeds; one that arrives after the expiry is rejected.
func TestHolderWriteJudgedAtArrivalBehindAnotherProcessLock(t *testing.T) {
	mc := lease.NewManualClock(t0)
	clock := &signalClock{ManualClock: mc, called: make(chan struct{}, 1)}
	b := setupWith(t, Options{Clock: clock}, tgsqlite.Options{BusyTimeout: time.Minute})
	a := b.create(t, "wf", "a")
	late := b.create(t, "wf", "late")
	ca := b.claim(t, "w1", a.TaskID, 5*time.Second)
	cl := b.claim(t, "w2", late.TaskID, 5*time.Second)

	// A second process takes the write lock.
	other, err := sql.Open("sqlite3", "file:"+b.path+"?_busy_timeout=60000")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(b.ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}

	mc.Advance(4 * time.Second) // 1 s of lease left
	for len(clock.called) > 0 {
		<-clock.called
	}
	inTime := make(chan error, 1)
	go func() {
		_, err := b.s.Heartbeat(b.ctx, holder(ca), 5*time.Second)
		inTime <- err
	}()
	<-clock.called // the heartbeat stamped its arrival, before the expiry

	// The lock is held past both leases' expiry.
	mc.Advance(10 * time.Second)
	lateErr := make(chan error, 1)
	go func() {
		_, err := b.s.Heartbeat(b.ctx, holder(cl), 5*time.Second)
		lateErr <- err
	}()
	if _, err := conn.ExecContext(b.ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if err := <-inTime; err != nil {
		t.Fatalf("a heartbeat that arrived 1 s before the expiry and waited behind another process's lock was rejected: %v", err)
	}
	wantStale(t, <-lateErr, lease.ReasonLeaseExpired)
	got := b.wantState(t, a.TaskID, StateClaimed)
	if want := mc.Now().Add(5 * time.Second); !got.LeaseExpiresAt.Equal(want) {
		t.Fatalf("lease expires at %v, want %v (extended from the time the write committed)", got.LeaseExpiresAt, want)
	}
	ev := lastEvent(t, b, a.TaskID, EventHeartbeat)
	var d struct {
		Arrived int64 `json:"arrived_at_ms"`
	}
	if err := json.Unmarshal(ev.Detail, &d); err != nil || d.Arrived != t0.Add(4*time.Second).UnixMilli() {
		t.Fatalf("heartbeat event %s at %v, want arrived_at_ms %d", ev.Detail, ev.At, t0.Add(4*time.Second).UnixMilli())
	}
	if _, err := b.s.Complete(b.ctx, holder(ca), json.RawMessage(`{}`)); err != nil {
		t.Fatalf("complete after the heartbeat: %v", err)
	}
}

// An arrival after the transaction's time (a backward clock step while
// queued) is judged at the transaction's time. (WithArrival's public
// behaviour is in the storetest suite.)
func TestJudgedAt(t *testing.T) {
	if got := judgedAt(t0.Add(time.Hour), t0); !got.Equal(t0) {
		t.Fatalf("judgedAt = %v, want %v", got, t0)
	}
}
