package taskgraph

import (
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
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
	b := setupWith(t, Options{Clock: clock, BusyTimeout: time.Minute})
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

// WithArrival lets a transport stamp the request earlier than the store call;
// both lease.Check and the fenced UPDATE use that time.
func TestWithArrival(t *testing.T) {
	b := setup(t)
	x := b.create(t, "wf", "x")
	y := b.create(t, "wf", "y")
	cx := b.claim(t, "w", x.TaskID, 5*time.Second)
	cy := b.claim(t, "w", y.TaskID, 5*time.Second)
	before := b.clock.Advance(4 * time.Second)
	b.clock.Advance(2 * time.Second) // both leases have lapsed now
	if _, err := b.s.Complete(WithArrival(b.ctx, before), holder(cx), json.RawMessage(`1`)); err != nil {
		t.Fatalf("complete stamped before the expiry: %v", err)
	}
	b.wantState(t, x.TaskID, StateCompleted)
	_, err := b.s.Complete(WithArrival(b.ctx, b.clock.Now()), holder(cy), json.RawMessage(`1`))
	wantStale(t, err, lease.ReasonLeaseExpired)
	// An arrival after the transaction's time (a backward clock step while
	// queued) is judged at the transaction's time.
	if got := judgedAt(t0.Add(time.Hour), t0); !got.Equal(t0) {
		t.Fatalf("judgedAt = %v, want %v", got, t0)
	}
}

// A claim, a sweep or a read queued ahead of a holder write decides which
// leases lapsed at its own arrival: one that arrived before the expiry never
// expires the lease that the holder write queued behind it renews.
func TestExpiryJudgedAtArrival(t *testing.T) {
	b := setup(t)
	x := b.create(t, "wf", "x")
	cx := b.claim(t, "w1", x.TaskID, 5*time.Second)
	early := b.clock.Advance(4 * time.Second)
	b.clock.Advance(10 * time.Second) // the lease lapsed 9 s ago
	if _, ok, err := b.s.Claim(WithArrival(b.ctx, early), ClaimRequest{Owner: "w2"}); err != nil || ok {
		t.Fatalf("claim-next that arrived before the expiry: ok=%v err=%v, want no task", ok, err)
	}
	if _, _, err := b.s.Claim(WithArrival(b.ctx, early), ClaimRequest{Owner: "w2", TaskID: x.TaskID}); !errors.Is(err, ErrConflict) {
		t.Fatalf("claim of the task that arrived before the expiry: %v, want a conflict", err)
	}
	if n, err := b.s.ExpireLeases(WithArrival(b.ctx, early)); err != nil || n != 0 {
		t.Fatalf("sweep that arrived before the expiry expired %d (err %v)", n, err)
	}
	if tk, err := b.s.Task(WithArrival(b.ctx, early), x.TaskID); err != nil || tk.State != StateClaimed {
		t.Fatalf("read that arrived before the expiry: %v %v", tk.State, err)
	}
	if _, err := b.s.Heartbeat(WithArrival(b.ctx, early.Add(500*time.Millisecond)), holder(cx), 0); err != nil {
		t.Fatalf("heartbeat that arrived before the expiry, after the others: %v", err)
	}
	b.wantState(t, x.TaskID, StateClaimed)
	// Judged now, a lapsed lease is expired as before.
	b.clock.Advance(time.Minute)
	c, ok, err := b.s.Claim(b.ctx, ClaimRequest{Owner: "w2"})
	if err != nil || !ok || c.Lease.Generation != 2 {
		t.Fatalf("claim-next after the renewed lease lapsed: ok=%v err=%v gen=%d", ok, err, c.Lease.Generation)
	}
}
