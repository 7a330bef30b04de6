package tgpostgres

import (
	"context"
	"sync"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

// calibrationSamples is how many round trips one calibration measures; the
// one with the smallest round trip gives the offset.
const calibrationSamples = 3

// dbClock is the database's clock as seen from this process: the local clock
// plus the offset to clock_timestamp() measured at the midpoint of a round
// trip. Its readings never go backwards.
type dbClock struct {
	local  lease.Clock
	sample func(ctx context.Context) (time.Time, error)

	mu     sync.Mutex
	offset time.Duration
	rtt    time.Duration
	last   time.Time
}

var _ lease.Clock = (*dbClock)(nil)

func newDBClock(local lease.Clock, sample func(context.Context) (time.Time, error)) *dbClock {
	return &dbClock{local: local, sample: sample}
}

// Now returns the local time corrected to the database's clock.
func (c *dbClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.local.Now().Add(c.offset)
	if t.Before(c.last) {
		t = c.last
	}
	c.last = t
	return t.UTC()
}

// Offset returns the current offset and the round trip it was measured with.
func (c *dbClock) Offset() (offset, rtt time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset, c.rtt
}

// calibrate measures the offset again and adopts the sample with the
// smallest round trip.
func (c *dbClock) calibrate(ctx context.Context) error {
	best := time.Duration(-1)
	var offset time.Duration
	for range calibrationSamples {
		start := time.Now()
		l0 := c.local.Now()
		db, err := c.sample(ctx)
		if err != nil {
			return err
		}
		l1 := c.local.Now()
		rtt := time.Since(start)
		mid := l0.Add(l1.Sub(l0) / 2)
		if best < 0 || rtt < best {
			best, offset = rtt, db.Sub(mid)
		}
	}
	c.mu.Lock()
	c.offset, c.rtt = offset, best
	c.mu.Unlock()
	return nil
}

// sampleClock reads the database's clock_timestamp().
func (d *Driver) sampleClock(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := d.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, err
}

// recalibrate measures the clock offset every CalibrateInterval.
func (d *Driver) recalibrate(ctx context.Context) {
	defer d.wg.Done()
	t := time.NewTicker(d.opts.CalibrateInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before, _ := d.clock.Offset()
		cctx, cancel := context.WithTimeout(ctx, d.opts.CalibrateInterval)
		err := d.clock.calibrate(cctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("could not read the database clock; keeping the last offset", "err", d.classify(ctx, err))
			}
			continue
		}
		if after, rtt := d.clock.Offset(); (after - before).Abs() > time.Second {
			d.log.Warn("the offset to the database clock moved by more than a second", "from", before, "to", after, "round_trip", rtt)
		}
	}
}

// monotonicWall is the default local clock: the wall time at its creation
// plus the monotonic time since, so that steps of the wall clock do not move
// it (the offset to the database absorbs any drift at each calibration).
type monotonicWall struct{ origin time.Time }

func newMonotonicWall() monotonicWall { return monotonicWall{origin: time.Now()} }

// Now returns the origin's wall time plus the monotonic time since.
func (m monotonicWall) Now() time.Time {
	return m.origin.Round(0).Add(time.Since(m.origin)).UTC()
}
