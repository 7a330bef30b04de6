package taskgraph

import (
	"context"
	"time"
)

// arrivalKey is the context key of a request's arrival time.
type arrivalKey struct{}

// WithArrival returns ctx carrying t as the server time at which the request
// arrived, so that a transport can stamp a request when it is read off the
// wire. Holder writes (Heartbeat, Complete, Fail, Cancel) are judged at that
// time: time the request then spends queued inside the server (behind the
// writer, another process's write lock, a batch) never costs its lease.
// Claims, ExpireLeases and Task decide which leases have lapsed at their
// arrival too, so an operation queued ahead of a holder write never expires
// the lease that write renews. A context without an arrival time is stamped
// when the store method is called.
func WithArrival(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, arrivalKey{}, t)
}

// arrival returns the arrival time carried by ctx, or the store's clock now.
func (s *Store) arrival(ctx context.Context) time.Time {
	if t, ok := ctx.Value(arrivalKey{}).(time.Time); ok && !t.IsZero() {
		return t.UTC()
	}
	return s.clock.Now().UTC()
}

// judgedAt is the server time at which a holder write that arrived at
// arrived is judged by a transaction running at now: the arrival, except that
// an arrival later than now (the wall clock was stepped back while the request
// was queued) is judged at now, in the same frame as the stored leases.
func judgedAt(arrived, now time.Time) time.Time {
	if arrived.After(now) {
		return now
	}
	return arrived
}

// arrived adds to a holder write's event detail the time the write was
// judged at, arrived_at_ms, when it is earlier than the event's own time (the
// write waited inside the server), so that the history shows the write was
// accepted within its lease.
func (w *wtx) arrived(detail map[string]any) map[string]any {
	if ms := w.judged.UnixMilli(); !w.judged.IsZero() && ms < w.nowMS {
		detail["arrived_at_ms"] = ms
	}
	return detail
}

// at is the server time this operation judges leases at: its arrival when
// it has one (holder writes, claims, sweeps, reads that expire a lease), else
// the transaction's time. New leases and recorded times use w.now.
func (w *wtx) at() time.Time {
	if w.judged.IsZero() {
		return w.now
	}
	return w.judged
}

// doAt is do for an operation judged at its arrival: fn sees w.judged set
// from arrived (judgedAt).
func (s *Store) doAt(ctx context.Context, arrived time.Time, fn func(*wtx) error) error {
	return s.do(ctx, func(w *wtx) error {
		w.judged = judgedAt(arrived, w.now)
		return fn(w)
	})
}
