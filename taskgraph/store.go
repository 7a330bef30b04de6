package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/audit"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/hotlane"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sharedread"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storeopts"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Options configure OpenDriver (package storeopts: each field and its
// default). The zero value is usable.
type Options = storeopts.Options

// Store is the durable task graph on one driver's database. A Store is safe
// for concurrent use.
type Store struct {
	drv   tgdriver.Driver
	info  tgdriver.Info
	caps  capabilities // the driver's optional capabilities
	opts  Options
	clock lease.Clock
	log   *slog.Logger
	quit  chan struct{} // closed by Close to stop background loops
	// drain is closed by Drain (once, under drainOnce): parked claim-next
	// calls answer ok false at once and new ones do not wait.
	drain     chan struct{}
	drainOnce sync.Once
	// dueChanged tells the sweeper that a task got a new due time (see
	// scheduleDue); it holds at most one signal.
	dueChanged chan struct{}
	wg         sync.WaitGroup
	closed     atomic.Bool // set as Close begins: do refuses from then on
	closeM     sync.Mutex  // serialises Close
	closing    bool        // under closeM: Close has begun

	notify waitQueue
	// changes wakes the watchers of Changed after every commit.
	changes changeSignal
	stats   counters
	lc      *leaseClock // the server's lease clock; nil unless Options.Sweep
	// claimAttempts counts claim-next attempts (write operations), so tests
	// can show that wake-ups match work.
	claimAttempts atomic.Int64
	// readOnly: the driver refuses writes; no background loop runs.
	readOnly bool
	// journal: the driver journals events and the linker links them after
	// each commit (tgdriver.Info.JournalEvents); false on a read-only store.
	journal bool
	linker  linker
	// hot runs claim-next, heartbeat and complete in batches (hot.go).
	hot *hotlane.Lane[*hotOp]
	// whyNone and keyOpens share the reads of claim-nexts that found
	// nothing, by workflow and capabilities (claimedNone, sharedKeyOpen):
	// when many workers run dry at once, one read answers them rather
	// than one each.
	whyNone  sharedread.Group[string, Claimed]
	keyOpens sharedread.Group[string, time.Time]
	// timers tells claim-next when to look for lapsed leases and due tasks.
	timers *probeTimers
}

// capabilities are a driver's optional capabilities (the interfaces of
// tgdriver's caps.go), asserted once, by OpenDriver: nothing else in the
// store looks at the driver's concrete type or name. A nil field is a
// capability the driver lacks.
type capabilities struct {
	clock    tgdriver.SharedClock
	replicas tgdriver.ReplicaCounter
}

func capabilitiesOf(d tgdriver.Driver) capabilities {
	var c capabilities
	c.clock, _ = d.(tgdriver.SharedClock)
	c.replicas, _ = d.(tgdriver.ReplicaCounter)
	return c
}

// OpenDriver starts a store on d, an opened driver, and owns it from then on:
// Close closes it, and so does a failed OpenDriver. With opts.Sweep it runs
// the lease sweeper, the lease clock and, when the driver reports other
// writers (Changes), wakes claim-next waiters for their work.
func OpenDriver(ctx context.Context, d tgdriver.Driver, opts Options) (*Store, error) {
	info, caps := d.Info(), capabilitiesOf(d)
	if opts.Clock == nil {
		if caps.clock != nil {
			opts.Clock = caps.clock.Clock()
		} else {
			opts.Clock = lease.SystemClock{}
			if opts.Monotonic == nil {
				opts.Monotonic = lease.NewSystemMonotonic()
			}
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ClockCheckInterval <= 0 {
		opts.ClockCheckInterval = defaultClockCheck
	}
	opts.ClockCheckInterval = min(opts.ClockCheckInterval, pauseGap/4)
	if opts.MaxRequestsPerPrincipal <= 0 {
		opts.MaxRequestsPerPrincipal = MaxRequestsPerPrincipal
	}
	if opts.MaxWaiters <= 0 {
		opts.MaxWaiters = DefaultMaxWaiters
	}
	if opts.MaxLeaseLosses <= 0 {
		opts.MaxLeaseLosses = DefaultMaxLeaseLosses
	}
	if opts.MaxLeaseLosses > MaxMaxLeaseLosses {
		d.Close() // a failed OpenDriver closes the driver it owns
		return nil, invalid("max_lease_losses", "must be between 1 and %d (got %d)", MaxMaxLeaseLosses, opts.MaxLeaseLosses)
	}
	s := &Store{drv: d, info: info, caps: caps, opts: opts, clock: opts.Clock, log: opts.Logger, quit: make(chan struct{}), drain: make(chan struct{}), dueChanged: make(chan struct{}, 1), readOnly: info.ReadOnly}
	s.notify.Init(opts.MaxWaiters)
	if s.readOnly {
		opts.Sweep = false
		s.opts.Sweep = false
	}
	s.journal = info.JournalEvents && !s.readOnly
	s.linker = linker{audit.NewLinker(d, s.log)}
	s.timers = newProbeTimers(!opts.Sweep)
	batches := 1
	if info.Connections > 0 {
		batches = opts.HotBatches
		if batches <= 0 {
			batches = defaultHotBatches
		}
		batches = min(batches, max(1, info.Connections/2))
	}
	s.hot = hotlane.New(batches, defaultHotBatchSize, s.runHot)
	if caps.replicas != nil {
		// The lane paces by the replicas the driver counted last.
		s.hot.CountReplicas(caps.replicas.Replicas)
	}
	hooks := tgdriver.Hooks{OnBatch: opts.OnBatch}
	if opts.Sweep {
		shared := caps.clock != nil
		s.lc = newLeaseClock(opts.Clock, opts.Monotonic, s.log, shared)
		if !shared {
			hooks.BatchStart = s.batchStart
		}
	}
	if err := d.Start(hooks); err != nil {
		d.Close()
		return nil, fmt.Errorf("open database %s: %w", info.Location, err)
	}
	if !s.readOnly {
		s.wg.Add(1)
		go s.watch()
	}
	if s.journal {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := s.quitContext()
			defer cancel()
			s.linker.Run(ctx)
		}()
	}
	if !s.readOnly {
		// A database migrated to hash format 2 records the switch (and the
		// workflows it had) in its audit chain before anything else.
		if err := s.ensureAudit(ctx); err != nil {
			s.Close()
			return nil, fmt.Errorf("open database %s: start the audit chain: %w", info.Location, err)
		}
	}
	if opts.Sweep {
		// The first write gives live leases back the downtime since the last
		// run, before Open returns and before anything is judged.
		if err := s.clockWrite(ctx); err != nil {
			s.Close()
			return nil, fmt.Errorf("open database %s: resume lease time: %w", info.Location, err)
		}
		s.wg.Add(3)
		go s.sweeper()
		go s.clockLoop(opts.ClockCheckInterval)
		go s.requestSweeper()
	}
	return s, nil
}

// Path returns the database's location: the SQLite file path, or the
// PostgreSQL URL without its password.
func (s *Store) Path() string { return s.info.Location }

// Driver returns the name of the store's driver: "sqlite" or "postgres".
func (s *Store) Driver() string { return s.info.Name }

// Clock returns the store's clock.
func (s *Store) Clock() lease.Clock { return s.clock }

// ReadOnly reports whether the store was opened read-only.
func (s *Store) ReadOnly() bool { return s.readOnly }

// errReadOnly is the error of every write of a read-only store.
func (s *Store) errReadOnly() error {
	return fmt.Errorf("%w: %s was opened for reading only, so this write was refused (writes go through a server or a read-write operator command such as admin or db prune)", ErrReadOnlyStore, s.info.Location)
}

// Drain tells the store that its server is shutting down: claim-next calls
// parked waiting for a task answer at once with ok false and
// Claimed.Draining set, and a claim-next that finds nothing from then on does
// not wait. Nothing else changes: every other operation, a claim-next that
// finds a task, live leases and the background loops run on until Close, so
// no accepted write is lost. A server calls it as its shutdown begins, so
// that parked claims do not hold the drain of in-flight calls for their whole
// wait. It is safe to call more than once and concurrently with anything.
func (s *Store) Drain() {
	s.drainOnce.Do(func() { close(s.drain) })
}

// Draining reports whether Drain was called.
func (s *Store) Draining() bool {
	select {
	case <-s.drain:
		return true
	default:
		return false
	}
}

// Close stops accepting operations, finishes those already accepted, stops
// the background loops, and closes the driver (which may tidy its database:
// the SQLite driver checkpoints the WAL as far as readers allow). It is safe to
// call more than once.
func (s *Store) Close() error {
	s.closeM.Lock()
	defer s.closeM.Unlock()
	if s.closing {
		return nil
	}
	s.closing = true
	// New writes are refused from here on (ErrClosed), also those of the
	// background loops, which stop next (a parked claim-next returns
	// ErrClosed); then a last write applies any observed shift and records
	// the alive time, and the driver finishes the writes it accepted.
	s.closed.Store(true)
	close(s.quit)
	s.wg.Wait()
	var errs []error
	if s.lc != nil {
		if err := s.lc.last(s); err != nil {
			errs = append(errs, err)
		}
	}
	// Link what this store journaled and no linker linked yet; what cannot
	// be linked now (the database is gone) stays journaled, and the next
	// store to run on the database links it.
	if err := s.linkAll(context.Background()); err != nil {
		s.log.Warn("could not link journaled events at close; the next server on this database links them", "err", err)
	}
	if err := s.drv.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Ping checks that the database answers a read.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.drv.Ping(ctx)
}

// Ready reports whether the store can commit a write now: nil, or an error
// matching ErrUnavailable (ErrBusy, ErrDiskFull, ErrReadOnly,
// ErrFilesReplaced, ErrUnreachable) or ErrClosed. It commits a probe write
// that never changes the data; if ctx ends before the probe commits, the
// error matches ErrBusy.
func (s *Store) Ready(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	err := s.drv.Ready(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%w: a probe write did not commit within the readiness deadline; the write lock is held by another process or the disk is slow (%w)", ErrBusy, err)
	}
	return err
}
