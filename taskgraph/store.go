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
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// SyncMode selects SQLite's synchronous setting for the write connection.
type SyncMode = tgsqlite.SyncMode

const (
	// SyncFull fsyncs the WAL on every commit: an acknowledged write survives
	// power loss. The default.
	SyncFull = tgsqlite.SyncFull
	// SyncNormal fsyncs only at checkpoints: an acknowledged write survives a
	// process crash but may be lost on power loss.
	SyncNormal = tgsqlite.SyncNormal
)

// DefaultBusyTimeout is how long a SQLite write waits for another process's
// write lock before it fails with ErrBusy, when Options.BusyTimeout is 0. It
// is well under the shortest useful lease (lease.DefaultDuration is 30 s),
// so a heartbeat that meets a lock learns so while its lease still runs.
const DefaultBusyTimeout = tgsqlite.DefaultBusyTimeout

// Options configure Open and OpenDriver. The zero value is usable. Sync,
// BusyTimeout, MaxBatch, ReadConns, WatchInterval and OnBatch configure the
// SQLite driver that Open and OpenReadOnly create; OpenDriver takes a driver
// configured already and uses only Clock, Logger, Sweep, Monotonic,
// ClockCheckInterval, MaxWaiters and OnBatch.
type Options struct {
	// Clock tells server time; nil means lease.SystemClock, or the driver's
	// clock when it has one (PostgreSQL: the database's clock, see
	// tgpostgres).
	Clock lease.Clock
	// Sync is SyncFull (default) or SyncNormal.
	Sync SyncMode
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// BusyTimeout is how long a connection waits for another process's write
	// lock before the write fails with ErrBusy; 0 means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// MaxBatch bounds the operations committed together; 0 means 256.
	MaxBatch int
	// ReadConns is the size of the read pool; 0 means 4.
	ReadConns int
	// Sweep marks the server's store: it runs a background loop that expires
	// leases as they lapse and wakes claim-next waiters, and it keeps lease
	// time running only while it runs (see leaseclock.go): on Open, live
	// leases get back the time since it was last alive, and while it runs,
	// pauses of the process and steps of the wall clock. One-shot tools
	// leave it off and never move leases.
	Sweep bool
	// Monotonic is the monotonic source compared with Clock to notice pauses
	// and clock steps (with Sweep). nil means Go's monotonic clock when Clock
	// is nil too; with a custom Clock and no Monotonic, pauses and steps
	// are not detected (the restart downtime still is). A lease.ManualClock
	// is both.
	Monotonic lease.Monotonic
	// ClockCheckInterval is how often the server's store compares its clocks;
	// 0 means 250 ms. It is capped at 500 ms: a monotonic gap of more than
	// 2 s between two checks is taken as the process having been away.
	ClockCheckInterval time.Duration
	// WatchInterval is how often the store looks for writes by other
	// processes to wake waiters, and checks that its database files are
	// still the ones it opened; 0 means 500 ms.
	WatchInterval time.Duration
	// MaxWaiters bounds the claim-next calls parked waiting for a task; 0
	// means DefaultMaxWaiters. At the bound, a claim-next that finds no task
	// answers at once with ErrWaitLimit instead of parking.
	MaxWaiters int
	// MaxRequestsPerPrincipal bounds the request answers kept for one
	// principal (see "Request ids"); 0 means MaxRequestsPerPrincipal.
	MaxRequestsPerPrincipal int
	// OnBatch, when set, is called after every commit attempt with the number
	// of operations in the batch (for metrics).
	OnBatch func(size int, took time.Duration, err error)
	// HotBatches bounds the batches of claim-next, heartbeat and complete
	// this store runs at once on a driver of many writers (PostgreSQL),
	// each one transaction on one connection: 0 means 2, and never more
	// than half the driver's connections, so that the hot path never holds
	// the whole pool. Operations that arrive while every batch runs wait
	// and go together in the next. The SQLite driver's one writer commits
	// one transaction at a time, and one batch runs at once there.
	HotBatches int
}

// Store is the durable task graph on one driver's database. A Store is safe
// for concurrent use.
type Store struct {
	drv   tgdriver.Driver
	sq    *tgsqlite.Driver // the SQLite driver, for what only SQLite has; nil otherwise
	info  tgdriver.Info
	opts  Options
	clock lease.Clock
	log   *slog.Logger
	quit  chan struct{} // closed by Close to stop background loops
	// dueChanged tells the sweeper that a task got a new due time (see
	// scheduleDue); it holds at most one signal.
	dueChanged chan struct{}
	wg         sync.WaitGroup
	closed     atomic.Bool // set as Close begins: do refuses from then on
	closeM     sync.Mutex  // serialises Close
	closing    bool        // under closeM: Close has begun

	notify waitQueue
	stats  counters
	lc     *leaseClock // the server's lease clock; nil unless Options.Sweep
	// claimAttempts counts claim-next attempts (write operations), so tests
	// can show that wake-ups match work.
	claimAttempts atomic.Int64
	// readOnly: the driver refuses writes; no background loop runs.
	readOnly bool
	// journal: the driver journals events and the linker links them after
	// each commit (tgdriver.Info.JournalEvents); false on a read-only store.
	journal bool
	linker  *linker
	// hot runs claim-next, heartbeat and complete in batches (hot.go).
	hot *hotLane
	// timers tells claim-next when to look for lapsed leases and due tasks.
	timers *probeTimers
}

// DefaultPath returns the default database path:
// $XDG_STATE_HOME/graph-engineering/tasks.db, else
// ~/.local/state/graph-engineering/tasks.db.
func DefaultPath() (string, error) { return tgsqlite.DefaultPath() }

func (o Options) sqliteOptions() tgsqlite.Options {
	return tgsqlite.Options{Sync: o.Sync, Logger: o.Logger, BusyTimeout: o.BusyTimeout, MaxBatch: o.MaxBatch,
		ReadConns: o.ReadConns, WatchInterval: o.WatchInterval}
}

// Open opens (creating if needed) the SQLite database at path, applies
// pending migrations, and starts the store on it (see OpenDriver). Its
// parent folder is created with mode 0700 if missing.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, invalid("database", "path is required")
	}
	switch opts.Sync {
	case "", SyncFull, SyncNormal:
	default:
		return nil, invalid("sync", "must be %q or %q (got %q)", SyncFull, SyncNormal, opts.Sync)
	}
	d, err := tgsqlite.Open(ctx, path, opts.sqliteOptions())
	if err != nil {
		return nil, err
	}
	s, err := OpenDriver(ctx, d, opts)
	if err != nil {
		return nil, err
	}
	s.sq = d
	return s, nil
}

// OpenReadOnly opens the existing SQLite database at path for reading only,
// for operator commands that must never write or wait on the file beside a
// running server (see tgsqlite.OpenReadOnly): no migration, no writer,
// sweeper or change watcher, no checkpoint on Close. Every write method
// returns an error matching ErrReadOnlyStore, and Task reports a lapsed lease
// as stored instead of expiring it. Backup works on it.
func OpenReadOnly(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, invalid("database", "path is required")
	}
	d, err := tgsqlite.OpenReadOnly(ctx, path, opts.sqliteOptions())
	if err != nil {
		return nil, err
	}
	opts.Sweep = false
	s, err := OpenDriver(ctx, d, opts)
	if err != nil {
		return nil, err
	}
	s.sq = d
	return s, nil
}

// clocked is a driver with a clock of its own (PostgreSQL: the database's).
type clocked interface{ Clock() lease.Clock }

// OpenDriver starts a store on d, an opened driver, and owns it from then on:
// Close closes it, and so does a failed OpenDriver. With opts.Sweep it runs
// the lease sweeper, the lease clock and, when the driver reports other
// writers (Changes), wakes claim-next waiters for their work.
func OpenDriver(ctx context.Context, d tgdriver.Driver, opts Options) (*Store, error) {
	info := d.Info()
	if opts.Clock == nil {
		if c, ok := d.(clocked); ok {
			opts.Clock = c.Clock()
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
	s := &Store{drv: d, info: info, opts: opts, clock: opts.Clock, log: opts.Logger, quit: make(chan struct{}), dueChanged: make(chan struct{}, 1), readOnly: info.ReadOnly}
	s.notify.init(opts.MaxWaiters)
	if s.readOnly {
		opts.Sweep = false
		s.opts.Sweep = false
	}
	s.journal = info.JournalEvents && !s.readOnly
	s.linker = newLinker(s)
	s.timers = newProbeTimers(!opts.Sweep)
	batches := 1
	if info.Connections > 0 {
		batches = opts.HotBatches
		if batches <= 0 {
			batches = defaultHotBatches
		}
		batches = min(batches, max(1, info.Connections/2))
	}
	s.hot = newHotLane(s, batches, defaultHotBatchSize)
	hooks := tgdriver.Hooks{OnBatch: opts.OnBatch}
	if opts.Sweep {
		s.lc = newLeaseClock(opts.Clock, opts.Monotonic, s.log, info.SharedClock)
		if !info.SharedClock {
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
		go s.linker.run()
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

// Close stops accepting operations, finishes those already accepted, stops
// the background loops, and closes the driver (the SQLite driver
// checkpoints the WAL as far as readers allow, see tgsqlite). It is safe to
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

// CheckResult reports Check (SQLite).
type CheckResult = tgsqlite.CheckResult

// ErrNotSQLite matches the error of the SQLite-only operations (Check,
// Backup) on a store of another driver.
var ErrNotSQLite = errors.New("not a SQLite database")

// Check runs SQLite's integrity check and, on a read-write store, a PASSIVE
// WAL checkpoint (see tgsqlite). Other drivers answer ErrNotSQLite.
func (s *Store) Check(ctx context.Context) (CheckResult, error) {
	if s.sq == nil {
		return CheckResult{}, fmt.Errorf("%w: %s is a %s database; use its own tools to check it (for PostgreSQL: amcheck, pg_stat_database)", ErrNotSQLite, s.info.Location, s.info.Name)
	}
	return s.sq.Check(ctx)
}

// ErrBackupExists matches the error Backup returns when dest already exists.
var ErrBackupExists = tgsqlite.ErrBackupExists

// ErrNoDatabase matches the error OpenReadOnly returns when there is no
// database at the path: no file, or an empty one that no server has
// initialised. It also matches fs.ErrNotExist when the file is missing.
var ErrNoDatabase = tgsqlite.ErrNoDatabase

// backuper is a driver that explains or makes backups.
type backuper interface {
	Backup(ctx context.Context, dest string) error
}

// Backup writes a consistent, compacted copy of the SQLite database to dest,
// a new file, while the store keeps serving (VACUUM INTO; see tgsqlite). It
// works on a read-only store. Other drivers explain what to use instead
// (PostgreSQL: pg_dump).
func (s *Store) Backup(ctx context.Context, dest string) error {
	if dest == "" {
		return invalid("destination", "a path for the backup file is required")
	}
	if b, ok := s.drv.(backuper); ok {
		return b.Backup(ctx, dest)
	}
	return fmt.Errorf("%w: %s is a %s database and has no built-in backup", ErrNotSQLite, s.info.Location, s.info.Name)
}

// CheckpointResult reports Checkpoint.
type CheckpointResult = tgsqlite.CheckpointResult

// Checkpoint is the explicit operator checkpoint of the SQLite database at
// path, beside running servers (see tgsqlite.Checkpoint).
func Checkpoint(ctx context.Context, path string) (CheckpointResult, error) {
	return tgsqlite.Checkpoint(ctx, path)
}
