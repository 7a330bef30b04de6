package taskgraph

import (
	"math"
	"sync/atomic"
	"time"
)

// probeTimers tells claim-next when a lapsed lease or a due task may be
// waiting, so that it looks for them (expireAndPromote: two index probes
// and, when it finds some, their writes) only then rather than on every
// claim. The server's sweeper sets the time from the database (the
// earliest lease expiry and due time of every task, whoever wrote them)
// each time it wakes, at the latest every second; a claim this store grants
// lowers it to its lease's expiry. Without a sweeper (a one-shot store)
// claim-next looks every time, as nobody else would.
//
// Looking is an optimisation of when, not of whether: the sweeper expires
// every lapsed lease and promotes every due task itself, at its time, so
// a claim that does not look meets them at most one sweep later.
type probeTimers struct {
	always bool
	next   atomic.Int64 // ms: the earliest time known to need a look
}

func newProbeTimers(always bool) *probeTimers {
	t := &probeTimers{always: always}
	t.next.Store(0) // look at once: nothing is known yet
	return t
}

// due reports whether a claim judged at at should look.
func (t *probeTimers) due(at time.Time) bool {
	return t.always || at.UnixMilli() >= t.next.Load()
}

// set records the earliest lease expiry or due time the sweeper found
// (ok false: none).
func (t *probeTimers) set(next time.Time, ok bool) {
	if !ok {
		t.next.Store(math.MaxInt64)
		return
	}
	t.next.Store(next.UnixMilli())
}

// lower records a lease expiry or due time this store set.
func (t *probeTimers) lower(at time.Time) {
	ms := at.UnixMilli()
	for {
		cur := t.next.Load()
		if ms >= cur || t.next.CompareAndSwap(cur, ms) {
			return
		}
	}
}

// leaseSet records a lease this store granted.
func (t *probeTimers) leaseSet(exp time.Time) { t.lower(exp) }

// probed records that a claim looked, at at: what was due then has been
// handled, up to the bounds of one look, and the sweeper sets the next
// time.
func (t *probeTimers) probed(*wtx) {}
