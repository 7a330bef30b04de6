package drivertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// ServerClock is implemented by the databases of drivers that are a
// tgdriver.SharedClock: ServerNow reads the database server's own clock,
// outside any driver, so that the contract can tell the database's time
// from a replica's.
type ServerClock interface {
	ServerNow(t testing.TB) time.Time
}

// clockSlack bounds how far a shared clock may read from the database's
// own clock, read just before and just after it: the driver corrects its
// local clock by an offset it measures over round trips to the database,
// so it errs by at most half such a round trip. A second is far more than
// that on any machine the tests run on, and far less than the seconds by
// which a replica's clock may be off (package taskgraph, "Lease time"),
// which the shared clock exists to absorb.
const clockSlack = time.Second

// clockTests are the clauses of tgdriver.SharedClock (caps.go).
var clockTests = []test{
	{"BatchStartOnlyWithoutASharedClock", testBatchStartOnlyWithoutASharedClock},
	{"SharedClockIsTheDatabases", testSharedClockIsTheDatabases},
}

// testBatchStartOnlyWithoutASharedClock: a driver that is a SharedClock
// never calls Hooks.BatchStart (a replica's own pause or clock step must
// move no lease); a single-writer driver without one calls it in every
// write transaction, before its operations (the domain's lease clock runs
// there).
func testBatchStartOnlyWithoutASharedClock(t *testing.T, h Harness) {
	var starts atomic.Int64
	e := newEnvHooks(t, h, tgdriver.Hooks{BatchStart: func(context.Context, tgdriver.Tx) (func(), error) {
		starts.Add(1)
		return nil, nil
	}})
	_, shared := e.d.(tgdriver.SharedClock)
	const writes = 3
	var seen [writes]int64 // BatchStart calls when each write's operation ran
	for i := range writes {
		e.write(func(tx tgdriver.Tx) error {
			seen[i] = starts.Load()
			_, err := tx.EnsureWorkflow(e.ctx, "wf", int64(i+1))
			return err
		})
	}
	if shared {
		if n := starts.Load(); n != 0 {
			t.Fatalf("the %s driver is a tgdriver.SharedClock but called Hooks.BatchStart %d times in %d writes", h.Name(), n, writes)
		}
		return
	}
	for i, n := range seen {
		if n != int64(i+1) {
			t.Fatalf("the %s driver has no shared clock: Hooks.BatchStart had run %d times when the operation of write %d of %d ran, want %d (once per write transaction, before its operations)",
				h.Name(), n, i+1, writes, i+1)
		}
	}
}

// testSharedClockIsTheDatabases: every replica of a SharedClock driver
// (two drivers open on one database) reads one clock, the database's:
// each replica's Clock().Now() lies between two readings of the database
// server's own clock taken around it, within clockSlack, and the replicas
// agree with each other in the same way. Drivers without a shared clock
// have nothing to check here.
func testSharedClockIsTheDatabases(t *testing.T, h Harness) {
	db := h.NewDatabase(t)
	first := db.Open(t)
	sc, ok := first.(tgdriver.SharedClock)
	if !ok {
		t.Skipf("the %s driver is not a tgdriver.SharedClock", h.Name())
	}
	srv, ok := db.(ServerClock)
	if !ok {
		t.Fatalf("the %s harness's database does not read the server's clock (drivertest.ServerClock), which a SharedClock driver's contract needs", h.Name())
	}
	second, ok := db.Open(t).(tgdriver.SharedClock)
	if !ok {
		t.Fatalf("a second %s driver on the same database is not a tgdriver.SharedClock", h.Name())
	}
	for _, d := range []tgdriver.Driver{first, second.(tgdriver.Driver)} {
		if err := d.Start(tgdriver.Hooks{}); err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	clocks := []lease.Clock{sc.Clock(), second.Clock()}
	for i, c := range clocks {
		if c == nil {
			t.Fatalf("replica %d's Clock() is nil", i+1)
		}
		before := srv.ServerNow(t)
		now := c.Now()
		after := srv.ServerNow(t)
		if now.Before(before.Add(-clockSlack)) || now.After(after.Add(clockSlack)) {
			t.Errorf("replica %d's shared clock reads %s, but the database's clock read %s before and %s after it (slack %s)",
				i+1, now.Format(time.RFC3339Nano), before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano), clockSlack)
		}
	}
	// The replicas agree with each other: one's reading lies between two
	// of the other's.
	a := clocks[0].Now()
	b := clocks[1].Now()
	c := clocks[0].Now()
	if b.Before(a.Add(-clockSlack)) || b.After(c.Add(clockSlack)) {
		t.Errorf("the replicas' shared clocks disagree: replica 2 read %s between replica 1's %s and %s (slack %s)",
			b.Format(time.RFC3339Nano), a.Format(time.RFC3339Nano), c.Format(time.RFC3339Nano), clockSlack)
	}
}
