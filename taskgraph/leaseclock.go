package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

// Lease time runs only while the server runs. Leases are stored as wall-clock
// expiries; when the server was away (stopped between a close or a crash and
// the next Open, paused by SIGSTOP or a VM freeze, or its wall clock stepped),
// every live lease is moved by the time the wall clock moved without a server
// running, and clamped to at most now + its own duration, so that
//
//   - a worker that kept working through the server's absence keeps the
//     remaining lease it had, and its queued heartbeat is accepted;
//   - a backward step never leaves a lease longer than its duration;
//   - a worker that really died is reclaimed within one lease after the
//     server is back.
//
// How much to move is read from the alive time recorded in the database, in
// the same transaction as the move (see step), so that servers sharing a
// database move leases once per event.
//
// Only the server's store (Options.Sweep) does this: one-shot tools neither
// shift leases nor record the alive time. Each moved lease is recorded as a
// lease_shift event of its workflow's history (with the new expiry), like a
// heartbeat's: the history stays a complete account of every lease, so a
// verifier can still show that no holder write was accepted after its lease.
// Shifts are rare (a restart, a pause, a step) and touch only live claims.
const (
	// pauseGap is the monotonic gap between two observations beyond which the
	// process is taken to have been away (stopped or frozen) for all of it.
	pauseGap = 2 * time.Second
	// minShift is the smallest shift applied; smaller differences between the
	// wall and monotonic clocks (slewing, scheduling noise) are ignored.
	minShift = 100 * time.Millisecond
	// aliveEvery is how stale the recorded alive time may get while leases are
	// live and no write comes.
	aliveEvery = time.Second
	// aliveBatchEvery throttles the alive time written by write batches.
	aliveBatchEvery = 100 * time.Millisecond
	// staleMin is how old the recorded alive time must be for a running
	// server that observed a pause or a step to move leases: beyond what
	// aliveEvery and the check interval leave in normal running, so that a
	// shift another server already applied is not applied again.
	staleMin = pauseGap
	// defaultClockCheck is Options.ClockCheckInterval's default.
	defaultClockCheck = 250 * time.Millisecond
)

// leaseClock notices the time the server was away and gives it back to live
// leases. It compares the wall clock with a monotonic source at every
// observation: a monotonic gap beyond pauseGap means the process was away for
// the whole wall-clock interval; otherwise the difference between the wall and
// monotonic intervals is a step of the wall clock. The accumulated shift is
// applied at the start of the next write batch, before any of its operations,
// so queued heartbeats are judged against the moved leases.
type leaseClock struct {
	wall lease.Clock
	mono lease.Monotonic // nil: no pause or step detection (a custom Clock without a Monotonic)
	log  *slog.Logger
	// shared: replicas on one database judge leases by one clock (the
	// database's: the driver is a tgdriver.SharedClock). A replica's own
	// pause costs no lease while others serve (they keep the alive time
	// fresh, and its clock follows the database's), so only the time no
	// replica ran at all, or a step of the shared clock, is given back
	// (sharedStep). The step runs in the clock loop's writes, and first in
	// any write of a process that has not seen the alive time for staleMin
	// (sharedDue), never at the start of every write.
	shared bool

	// stepping makes the writes that find a shared step due run one step.
	stepping sync.Mutex

	mu       sync.Mutex
	lastW    time.Time
	lastM    time.Duration
	pending  time.Duration // observed, not yet applied
	inflight time.Duration // applied by the batch in progress, not yet committed
	aliveMS  int64         // the alive time last committed
	// ranMS is the latest time a write of this process took as its time
	// and tried to record as the shared alive time (sharedTouch), whether
	// or not the touch went through: another transaction of this process
	// holding the alive row (and committing an earlier time) makes it skip.
	// This process ran then, so the shared step never gives back time
	// before it.
	ranMS   int64
	resumed bool // the downtime before Open has been given back
	final   bool // Close's last batch: record the alive time whatever its age
}

func newLeaseClock(wall lease.Clock, mono lease.Monotonic, log *slog.Logger, shared bool) *leaseClock {
	if shared {
		mono = nil
	}
	c := &leaseClock{wall: wall, mono: mono, log: log, shared: shared}
	c.lastW = wall.Now()
	if mono != nil {
		c.lastM = mono.Elapsed()
	}
	return c
}

// observe compares the clocks with the last observation and accumulates the
// time the server was away.
func (c *leaseClock) observe() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observeLocked()
}

func (c *leaseClock) observeLocked() {
	if c.mono == nil {
		return
	}
	w, m := c.wall.Now(), c.mono.Elapsed()
	dw, dm := w.Sub(c.lastW), m-c.lastM
	c.lastW, c.lastM = w, m
	away := dw - dm // a step of the wall clock
	if dm > pauseGap {
		away = dw // the process did not run: the whole interval was away
	}
	if away >= minShift || away <= -minShift {
		c.pending += away
	}
}

// take observes the clocks and returns the shift the next batch must apply,
// including one taken by a batch that did not commit.
func (c *leaseClock) take() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observeLocked()
	shift := c.pending + c.inflight
	c.pending, c.inflight = 0, shift
	return shift
}

// step runs at the start of every write batch of the server's store, inside
// its transaction, before any operation, and records the alive time. The
// shift it applies is coordinated through the database, so that several
// server processes on one database (and one host clock) apply a clock step or
// a shared freeze once, not once each:
//
//   - in the first batch after Open, live leases move by the downtime, now
//     minus the recorded alive time (forward or backward);
//   - later, only when this process observed that it was away (a pause or a
//     step of its clock, see observe), and then by the part of that time for
//     which no server kept the alive time fresh: the recorded alive time is
//     at least staleMin old (or that far in the future) in the same
//     direction, and the shift is the smaller of the two. A process that was
//     paused while another served moves nothing; a write lock held by another
//     process for a while, with no pause, moves nothing either.
func (c *leaseClock) step(w *wtx) error {
	if c.shared {
		return c.sharedStep(w)
	}
	away := c.take()
	c.mu.Lock()
	resumed, final := c.resumed, c.final
	c.mu.Unlock()
	var shift time.Duration
	if !resumed || away != 0 {
		alive, found, err := w.tx.ReadAlive(w.ctx)
		switch {
		case err != nil:
			return fmt.Errorf("read the server's alive time: %w", err)
		case found:
			stale := time.Duration(w.nowMS-alive) * time.Millisecond
			switch {
			case !resumed && c.shared:
				if stale >= staleMin || stale <= -staleMin {
					shift = stale
				}
			case !resumed:
				if stale >= minShift || stale <= -minShift {
					shift = stale
				}
			case away > 0 && stale >= staleMin:
				shift = min(away, stale)
			case away < 0 && stale <= -staleMin:
				shift = max(away, stale)
			}
		}
	}
	if shift != 0 {
		n, err := w.shiftLeases(shift)
		if err != nil {
			return err
		}
		w.afterCommit(func() {
			if n > 0 {
				c.log.Info("the server was away or its clock was stepped; live leases moved by that time", "shift", shift.String(), "leases", n)
			}
		})
	}
	c.mu.Lock()
	writeAlive := !resumed || final || shift != 0 || w.nowMS-c.aliveMS >= aliveBatchEvery.Milliseconds() || w.nowMS < c.aliveMS
	c.mu.Unlock()
	if writeAlive {
		if err := w.tx.TouchAlive(w.ctx, w.nowMS); err != nil {
			return fmt.Errorf("record the server's alive time: %w", err)
		}
	}
	now := w.nowMS
	w.afterCommit(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.inflight = 0
		c.resumed = true
		if writeAlive {
			c.aliveMS = now
		}
	})
	return nil
}

// sharedStep is step with a clock shared by replicas (PostgreSQL). The time
// to give back is the time no replica kept the alive time fresh: every
// replica refreshes it once a second while leases are live, so an alive time
// at least staleMin old (or that far in the future: the shared clock stepped
// back) means no replica ran for that long, or the shared clock stepped.
// Live leases move by that much, clamped as always. The alive row is locked
// as it is read, so replicas that notice at once apply it once.
func (c *leaseClock) sharedStep(w *wtx) error {
	alive, found, err := w.tx.ReadAlive(w.ctx)
	if err != nil {
		return fmt.Errorf("read the servers' alive time: %w", err)
	}
	// The step's time is taken once it holds the alive row, not when its
	// transaction began: a step that waited there for another server's
	// step, across a step of the shared clock, must not measure the clock
	// step again against the alive time that step recorded.
	now := c.wall.Now().UTC()
	w.now, w.nowMS = now, now.UnixMilli()
	c.mu.Lock()
	ran := c.ranMS
	if ran-w.nowMS >= staleMin.Milliseconds() {
		// From before a backward step of the shared clock (which
		// another server may have given back already): not a time this
		// process ran at on the clock as it is now.
		c.ranMS, ran = 0, 0
	}
	c.mu.Unlock()
	if found && ran > alive {
		// This process ran later than the recorded alive time says: a
		// touch of its own skipped while a transaction of its own that
		// took an earlier time held the row. (A time staleMin or more
		// ahead of this step's is from before a backward step of the
		// shared clock, which one step gives back once.)
		alive = ran
	}
	var shift time.Duration
	if found {
		if stale := time.Duration(w.nowMS-alive) * time.Millisecond; stale >= staleMin || stale <= -staleMin {
			shift = stale
		}
	}
	touch := w.nowMS
	if found && shift == 0 && alive > touch {
		// Never move a fresher alive time back (this step's time was
		// taken when its transaction began).
		touch = alive
	}
	if shift != 0 {
		// One statement moves every live lease; a writer holding one of
		// them may deadlock with it, and the driver runs the loser again.
		n, err := w.shiftLeases(shift)
		if err != nil {
			return err
		}
		w.afterCommit(func() {
			if n > 0 {
				c.log.Info("no server ran, or the database's clock was stepped; live leases moved by that time", "shift", shift.String(), "leases", n)
			}
		})
	}
	if err := w.tx.TouchAlive(w.ctx, touch); err != nil {
		return fmt.Errorf("record the servers' alive time: %w", err)
	}
	w.afterCommit(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.resumed = true
		c.aliveMS = touch
		if shift != 0 {
			c.ranMS = 0 // from before a step of the shared clock
		}
	})
	return nil
}

// sharedTouch refreshes, with a shared clock, the alive time in passing in
// w when this process last recorded it at least aliveBatchEvery ago, without
// waiting for another transaction that holds it, so that the time given back
// after an absence is measured to within that, or to within how long another
// server's transaction held the row (this process's own skipped touches
// count through ranMS). The error is always in the holders' favour: a lease
// gets a little more back, never less.
func (c *leaseClock) sharedTouch(w *wtx) error {
	c.mu.Lock()
	due := w.nowMS-c.aliveMS >= aliveBatchEvery.Milliseconds()
	// The time recorded is this write's, or the clock's now if that is
	// earlier: a write that took its time before a backward step of the
	// shared clock, and touches after a step applied it, must not record
	// a time ahead of the clock, which the next step would take for
	// another backward step and give back again (every live lease lost).
	// Read under c.mu, with ranMS, so that a step's reset of ranMS (at its
	// commit) is never followed by a time from before that step. The
	// write itself may still come after a step committed (this
	// transaction took its time, then waited or was descheduled before its
	// touch): so the driver moves the recorded time only forward, and by
	// less than staleMin (TryTouchAlive's window), and a time from before
	// a backward step is never recorded after the step gave it back (the
	// likely cause of a CI failure of LeaseTime/BackwardClockStep, where a
	// lease lapsed before its time).
	now := min(w.nowMS, c.wall.Now().UnixMilli())
	if due {
		c.ranMS = max(c.ranMS, now)
	}
	c.mu.Unlock()
	if !due {
		return nil
	}
	touched, err := w.tx.TryTouchAlive(w.ctx, now, staleMin.Milliseconds())
	if err != nil || !touched {
		return err
	}
	w.afterCommit(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.aliveMS = max(c.aliveMS, now)
	})
	return nil
}

// sharedDue reports whether, with a shared clock, this process last saw the
// alive time so long ago (at its own writes) that an operation must check it
// before it is judged: the process may have been paused, or the clock
// stepped, since.
func (c *leaseClock) sharedDue(nowMS int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := nowMS - c.aliveMS
	return d >= staleMin.Milliseconds() || d <= -staleMin.Milliseconds()
}

// last runs Close's final write, after every sender is done and before the
// background loops stop: it applies any shift still pending and records the
// alive time.
func (c *leaseClock) last(s *Store) error {
	c.mu.Lock()
	c.final = true
	c.mu.Unlock()
	if err := s.stepWrite(context.Background()); err != nil {
		return fmt.Errorf("record the server's alive time at close: %w", err)
	}
	return nil
}

// clockWrite commits a write that runs the lease clock's step: with a
// single-writer driver an empty operation, whose batch runs the step first
// (batchStart); with a shared clock the step itself.
func (s *Store) clockWrite(ctx context.Context) error {
	if s.readOnly {
		return s.errReadOnly()
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return s.stepWrite(ctx)
}

// stepWrite is clockWrite without the checks of do, for Close's last
// write too. The shared step reads and records the alive time itself, so
// it runs as a transaction of its own, without the pause check and the
// touch in passing that write adds to other operations.
func (s *Store) stepWrite(ctx context.Context) error {
	if s.lc.shared {
		return s.writeTx(ctx, s.lc.step, false)
	}
	return s.write(ctx, func(*wtx) error { return nil })
}

// shiftLeases moves every live lease by shift, clamped to now + its duration,
// and records a lease_shift event for each: the history stays a complete
// account of every lease's expiry, so that a verifier can show no holder
// write was accepted after its lease.
func (w *wtx) shiftLeases(shift time.Duration) (int, error) {
	moved, err := w.tx.ShiftLeases(w.ctx, shift.Milliseconds(), w.nowMS, lease.DefaultDuration.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("give live leases back %s: %w", shift, err)
	}
	for _, m := range moved {
		r, err := w.loadSeq(m.Seq)
		if err != nil {
			return 0, err
		}
		if err := w.appendEvent(&r, EventLeaseShift, r.Owner, r.Generation, map[string]any{"lease_expires_at_ms": m.ExpiresAtMS, "shift_ms": shift.Milliseconds()}); err != nil {
			return 0, err
		}
	}
	return len(moved), nil
}

// clockLoop observes the clocks every interval, so that a pause or a step is
// measured from just before it, and makes sure an observed shift and a stale
// alive time reach the database even when no other write comes.
func (s *Store) clockLoop(interval time.Duration) {
	defer s.wg.Done()
	ctx, cancel := s.quitContext()
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	c := s.lc
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		c.observe()
		c.mu.Lock()
		need := c.pending != 0
		stale := s.clock.Now().UnixMilli()-c.aliveMS >= aliveEvery.Milliseconds()
		c.mu.Unlock()
		if !need && stale {
			next, err := s.nextLeaseExpiry(ctx)
			need = err == nil && !next.IsZero() // leases are live
		}
		if !need {
			continue
		}
		if err := s.clockWrite(ctx); err != nil {
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				return
			}
			s.log.Warn("could not record the server's clock; retrying", "err", err)
		}
	}
}
