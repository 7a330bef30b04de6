package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// startWatch notices writes made by other processes (an operator command,
// another server) through PRAGMA data_version, which changes on one
// connection whenever any other connection commits, and wakes at most as many
// claim-next waiters as there are pending tasks they may claim. The baseline is read before Open returns, so no write made after
// Open can be missed. Each tick also checks the database files (checkFiles),
// so a replaced file trips even an idle store and Ready reports it.
func (s *Store) startWatch(ctx context.Context) error {
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("start change watcher: %w", err)
	}
	var last int64
	if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&last); err != nil {
		conn.Close()
		return fmt.Errorf("start change watcher: %w", err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer conn.Close()
		t := time.NewTicker(s.opts.WatchInterval)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
			// The same tick notices replaced database files on an idle
			// store (a busy one notices them at every batch); a trip is
			// logged and answered by checkFiles itself.
			_ = s.checkFiles()
			var v int64
			if err := conn.QueryRowContext(context.Background(), `PRAGMA data_version`).Scan(&v); err != nil {
				s.log.Warn("read data_version", "err", err)
				continue
			}
			if v != last && s.notify.len() > 0 {
				if err := s.wakeForPending(context.Background(), conn); err != nil {
					s.log.Warn("wake claim-next waiters after another process's write; retrying at the next check", "err", err)
					continue
				}
			}
			last = v
		}
	}()
	return nil
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

// sweeper expires leases as they lapse, so that expiries are recorded (and
// claim-next waiters woken) without waiting for the next claim. It wakes at
// the earliest lease expiry, and at least once a second.
func (s *Store) sweeper() {
	defer s.wg.Done()
	ctx, cancel := s.quitContext()
	defer cancel()
	for {
		sleep := time.Second
		next, err := s.nextLeaseExpiry(ctx)
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
		}
	}
}

// counters are the store's cumulative event counts since Open.
type counters struct {
	claims, reclaims, completions, failures, retries, expiries, cancels, cascadeCancels, staleRejections atomic.Int64
}

// Stats are cumulative counts since the store was opened, for metrics.
type Stats struct {
	Claims          int64 // leases granted
	Reclaims        int64 // leases granted on a task that had been claimed before
	Completions     int64
	Failures        int64 // terminal failures, including leases expired on the last attempt
	Retries         int64 // retryable failures sent back to pending
	Expiries        int64 // leases that lapsed
	Cancels         int64 // holder, protocol and operator cancellations
	CascadeCancels  int64 // dependents cancelled because an upstream task failed or was cancelled
	StaleRejections int64 // holder writes rejected because the claim was not live
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{
		Claims: c.claims.Load(), Reclaims: c.reclaims.Load(), Completions: c.completions.Load(),
		Failures: c.failures.Load(), Retries: c.retries.Load(), Expiries: c.expiries.Load(),
		Cancels: c.cancels.Load(), CascadeCancels: c.cascadeCancels.Load(), StaleRejections: c.staleRejections.Load(),
	}
}
