package taskgraph

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// watch wakes claim-next waiters for work made claimable by other
// processes or replicas, as the driver reports it (Changes): a change naming
// workflows wakes one waiter per ready task; an unknown change (SQLite's
// data_version, a reconnected listener) wakes at most as many waiters as
// there are pending tasks they may claim, with lookups bounded by the
// number of waiters.
func (s *Store) watch() {
	defer s.wg.Done()
	ch := s.drv.Changes()
	if ch == nil {
		return
	}
	ctx, cancel := s.quitContext()
	defer cancel()
	for {
		select {
		case <-s.quit:
			return
		case c := <-ch:
			s.changes.signal()
			if s.notify.Len() == 0 {
				continue
			}
			if len(c.Workflows) > 0 {
				refs := make([]readyRef, len(c.Workflows))
				for i, wf := range c.Workflows {
					refs[i].Workflow = wf
					if i < len(c.Requires) {
						refs[i].Requires = c.Requires[i]
					}
				}
				s.notify.WakeAll(refs)
			}
			if c.Unknown {
				if err := s.wakeForPending(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("wake claim-next waiters after another process's write", "err", err)
				}
			}
		}
	}
}

// quitContext returns a context that ends when the store closes (s.quit),
// for a background loop's store calls.
func (s *Store) quitContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.quit:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

// sweeper expires leases as they lapse, promotes pending tasks as they
// become due and decides gates whose timeout came, so that expiries are recorded and due tasks claimable (and
// claim-next waiters woken) without waiting for the next claim. It wakes at
// the earliest lease expiry or due time, when a write set a new due time
// (scheduleDue), and at least once a second.
func (s *Store) sweeper() {
	defer s.wg.Done()
	ctx, cancel := s.quitContext()
	defer cancel()
	for {
		sleep := time.Second
		// What this pass reads tells claim-next when to look for lapsed
		// leases and due tasks itself (probeTimers).
		var earliest time.Time
		if next, err := s.nextDue(ctx); err == nil && !next.IsZero() {
			earliest = next
			if d := next.Sub(s.clock.Now()); d <= 0 {
				n, err := s.PromoteDue(ctx)
				switch {
				case errors.Is(err, ErrClosed):
					return
				case err != nil && ctx.Err() == nil:
					s.log.Warn("promoting due tasks failed; retrying in a second", "err", err)
				case n > 0:
					s.log.Debug("due tasks promoted", "count", n)
				}
			} else if d < sleep {
				sleep = d + time.Millisecond
			}
		}
		// Gates whose timeout came are decided here only (claim-next does
		// not look for them: a gate is never claimed), so they stay out of
		// the probe timers.
		if next, err := s.nextGateDue(ctx); err == nil && !next.IsZero() {
			if d := next.Sub(s.clock.Now()); d <= 0 {
				n, err := s.DecideDueGates(ctx)
				switch {
				case errors.Is(err, ErrClosed):
					return
				case err != nil && ctx.Err() == nil:
					s.log.Warn("deciding gates at their timeout failed; retrying in a second", "err", err)
				case n > 0:
					s.log.Info("gates decided at their timeout", "count", n)
				}
			} else if d < sleep {
				sleep = d + time.Millisecond
			}
		}
		next, err := s.nextLeaseExpiry(ctx)
		if err == nil && !next.IsZero() && (earliest.IsZero() || next.Before(earliest)) {
			earliest = next
		}
		s.timers.set(earliest, !earliest.IsZero())
		if err == nil && !next.IsZero() {
			if d := next.Sub(s.clock.Now()); d <= 0 {
				n, err := s.ExpireLeases(ctx)
				if err == nil {
					if n > 0 {
						s.log.Info("leases expired", "count", n)
					}
					continue
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if ctx.Err() == nil {
					s.log.Warn("lease sweep failed; retrying in a second", "err", err)
				}
			} else if d < sleep {
				sleep = d + time.Millisecond
			}
		}
		t := time.NewTimer(sleep)
		select {
		case <-s.quit:
			t.Stop()
			return
		case <-t.C:
		case <-s.dueChanged:
			t.Stop()
		}
	}
}

// counters are the store's cumulative event counts since Open.
type counters struct {
	claims, reclaims, completions, failures, retries, expiries, cancels, cascadeCancels, staleRejections, replays atomic.Int64
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{
		Claims: c.claims.Load(), Reclaims: c.reclaims.Load(), Completions: c.completions.Load(),
		Failures: c.failures.Load(), Retries: c.retries.Load(), Expiries: c.expiries.Load(),
		Cancels: c.cancels.Load(), CascadeCancels: c.cascadeCancels.Load(), StaleRejections: c.staleRejections.Load(),
		Replays: c.replays.Load(),
	}
}
