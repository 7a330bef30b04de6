package taskgraph

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/schema"
)

// driverName is go-sqlite3 with a connect hook for the settings its DSN
// cannot express; every connection of the store is opened through it.
const driverName = "sqlite3_taskgraph"

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		// The temporary tables SQLite builds for IN lists, sorts and statement
		// journals live in memory rather than in a temp file created and
		// deleted per statement: in WAL mode that file cost a multi-row UPDATE
		// about 100 µs instead of 10 µs.
		if _, err := c.Exec(`PRAGMA temp_store = MEMORY`, nil); err != nil {
			return fmt.Errorf("set temp_store: %w", err)
		}
		return nil
	}})
}

// SyncMode selects SQLite's synchronous setting for the write connection.
type SyncMode string

const (
	// SyncFull fsyncs the WAL on every commit: an acknowledged write survives
	// power loss. The default.
	SyncFull SyncMode = "full"
	// SyncNormal fsyncs only at checkpoints: an acknowledged write survives a
	// process crash but may be lost on power loss.
	SyncNormal SyncMode = "normal"
)

// Options configure Open. The zero value is usable.
type Options struct {
	// Clock tells server time; nil means lease.SystemClock.
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
	// OnBatch, when set, is called after every commit attempt with the number
	// of operations in the batch (for metrics).
	OnBatch func(size int, took time.Duration, err error)
}

// Store is the durable task graph. All writes go through one writer goroutine
// that commits waiting operations together (group commit); reads use a
// separate pool. A Store is safe for concurrent use.
type Store struct {
	path   string
	opts   Options
	clock  lease.Clock
	log    *slog.Logger
	wdb    *sql.DB // exactly one connection, owned by the writer goroutine
	rdb    *sql.DB
	ops    chan *op
	quit   chan struct{} // closed by Close to stop background loops
	wg     sync.WaitGroup
	closed atomic.Bool
	// closeM serialises Close. It is never taken by submit: Close waits for
	// the background loops while holding it, and those loops submit writes.
	closeM sync.Mutex
	// sendM orders submit's closed check and sendWG.Add against Close setting
	// closed; it is held only for those few instructions.
	sendM  sync.Mutex
	sendWG sync.WaitGroup // senders between the closed check and the channel send

	notify waitQueue
	stats  counters
	lc     *leaseClock // the server's lease clock; nil unless Options.Sweep
	// claimAttempts counts claim-next attempts (write operations), so tests
	// can show that wake-ups match work.
	claimAttempts atomic.Int64
	// readOnly: opened by OpenReadOnly; wdb is nil, no background loop runs.
	readOnly bool
	files    fileGuard // identity of the database files (health.go)
}

// DefaultPath returns the default database path:
// $XDG_STATE_HOME/graph-engineering/tasks.db, else
// ~/.local/state/graph-engineering/tasks.db.
func DefaultPath() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "graph-engineering", "tasks.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the default database path: %w (set --database or XDG_STATE_HOME)", err)
	}
	return filepath.Join(home, ".local", "state", "graph-engineering", "tasks.db"), nil
}

// readDefaults fills in the options every store uses, read-only ones too:
// Logger, BusyTimeout and ReadConns.
func (o *Options) readDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
}

// fileDSN is the data source name of the database file at path with the
// connection parameters q.
func fileDSN(path string, q url.Values) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Open opens (creating if needed) the database at path, applies pending
// migrations, and starts the writer. Its parent folder is created with mode
// 0700 if missing.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, invalid("database", "path is required")
	}
	if opts.Clock == nil {
		opts.Clock = lease.SystemClock{}
		if opts.Monotonic == nil {
			opts.Monotonic = lease.NewSystemMonotonic()
		}
	}
	if opts.ClockCheckInterval <= 0 {
		opts.ClockCheckInterval = defaultClockCheck
	}
	opts.ClockCheckInterval = min(opts.ClockCheckInterval, pauseGap/4)
	switch opts.Sync {
	case "":
		opts.Sync = SyncFull
	case SyncFull, SyncNormal:
	default:
		return nil, invalid("sync", "must be %q or %q (got %q)", SyncFull, SyncNormal, opts.Sync)
	}
	opts.readDefaults()
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.MaxWaiters <= 0 {
		opts.MaxWaiters = DefaultMaxWaiters
	}
	if opts.WatchInterval <= 0 {
		opts.WatchInterval = 500 * time.Millisecond
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, refineOpenErr(path, fmt.Errorf("create database folder %s: %w", dir, err))
		}
	}
	if err := inspect(ctx, path, opts); err != nil {
		return nil, refineOpenErr(path, classifyErr(err, opts.BusyTimeout))
	}
	s := &Store{path: path, opts: opts, clock: opts.Clock, log: opts.Logger, ops: make(chan *op, 1024), quit: make(chan struct{})}
	s.notify.init(opts.MaxWaiters)
	var err error
	if s.wdb, err = openDB(path, opts, false); err != nil {
		return nil, refineOpenErr(path, s.classify(err))
	}
	if err := s.migrate(ctx); err != nil {
		s.wdb.Close()
		return nil, refineOpenErr(path, s.classify(err))
	}
	if s.rdb, err = openDB(path, opts, true); err != nil {
		s.wdb.Close()
		return nil, err
	}
	// The read pool gets one extra connection, held by the change watcher.
	s.rdb.SetMaxOpenConns(opts.ReadConns + 1)
	s.rdb.SetMaxIdleConns(opts.ReadConns + 1)
	// Recorded before the change watcher starts: it checks them too.
	if err := s.recordFiles(); err != nil {
		s.rdb.Close()
		s.wdb.Close()
		return nil, err
	}
	if err := s.startWatch(ctx); err != nil {
		s.rdb.Close()
		s.wdb.Close()
		return nil, err
	}
	if opts.Sweep {
		s.lc = newLeaseClock(opts.Clock, opts.Monotonic, s.log)
	}
	s.wg.Add(1)
	go s.writer()
	if opts.Sweep {
		// The first batch gives live leases back the downtime since the last
		// run, before Open returns and before anything is judged.
		if err := s.do(ctx, func(*wtx) error { return nil }); err != nil {
			s.Close()
			return nil, fmt.Errorf("open database %s: resume lease time: %w", path, err)
		}
		s.wg.Add(2)
		go s.sweeper()
		go s.clockLoop(opts.ClockCheckInterval)
	}
	return s, nil
}

// inspect refuses, before anything writes to it, an existing file that this
// binary must not use: one that is not a database, one written by a newer
// schema (schema.ErrTooNew) and another program's database
// (schema.ErrForeign). It reads through a query-only connection that sets no
// journal mode; the writer's connection turns the file to WAL mode as it
// opens, which would change a refused file. Migrate checks the version again
// inside its write transaction.
func inspect(ctx context.Context, path string, opts Options) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return nil // a new database
	}
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	q.Set("_query_only", "on")
	db, err := sql.Open(driverName, fileDSN(path, q))
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := schema.Inspect(ctx, db); err != nil {
		return fmt.Errorf("open database %s: %w", path, describeOpenErr(err))
	}
	return nil
}

// openDB opens a pool on path and verifies every pragma the store relies on.
func openDB(path string, opts Options, readOnly bool) (*sql.DB, error) {
	q := url.Values{}
	// WAL: readers never block the writer and the writer never blocks readers.
	q.Set("_journal_mode", "WAL")
	// Wait for another process's lock instead of failing at once with SQLITE_BUSY.
	q.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	// Edges and tasks reference each other; the database enforces it.
	q.Set("_foreign_keys", "on")
	if readOnly {
		q.Set("_query_only", "on")
		q.Set("_txlock", "deferred")
	} else {
		q.Set("_synchronous", string(opts.Sync))
		// database/sql's Begin starts BEGIN IMMEDIATE: the write lock is taken
		// before the first read, so every check and the write it guards see
		// one state.
		q.Set("_txlock", "immediate")
	}
	dsn := fileDSN(path, q)
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if readOnly {
		db.SetMaxOpenConns(opts.ReadConns)
		db.SetMaxIdleConns(opts.ReadConns)
	} else {
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
	}
	db.SetConnMaxLifetime(0)
	if err := verifyPragmas(db, opts, readOnly); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, nil
}

func verifyPragmas(db *sql.DB, opts Options, readOnly bool) error {
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		return describeOpenErr(err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal_mode is %q, want wal (is the file on a filesystem without shared memory?)", mode)
	}
	var fk int
	if err := db.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		return fmt.Errorf("foreign_keys is %d (err %v), want 1", fk, err)
	}
	if !readOnly {
		var syn int
		if err := db.QueryRow(`PRAGMA synchronous`).Scan(&syn); err != nil {
			return err
		}
		want := map[SyncMode]int{SyncNormal: 1, SyncFull: 2}[opts.Sync]
		if syn != want {
			return fmt.Errorf("synchronous is %d, want %d (%s)", syn, want, opts.Sync)
		}
	}
	return nil
}

func describeOpenErr(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrNotADB || se.Code == sqlite3.ErrCorrupt) {
		return fmt.Errorf("the file is not a graph-engineering database or is damaged: %w", err)
	}
	return err
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.path, describeOpenErr(err))
	}
	defer tx.Rollback()
	from, to, err := schema.Apply(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", s.path, err)
	}
	if from != to {
		s.log.Info("database schema migrated", "path", s.path, "from", from, "to", to)
	}
	return nil
}

// Path returns the database file path.
func (s *Store) Path() string { return s.path }

// Clock returns the store's clock.
func (s *Store) Clock() lease.Clock { return s.clock }

// Close stops accepting operations, finishes those already queued, stops the
// background loops, checkpoints the WAL into the database file as far as
// readers allow and closes it. It is safe to call more than once.
//
// The checkpoint is PASSIVE: it copies what no reader still needs and never
// waits for a reader (a long audit verify, db backup or sqlite3 shell in
// another process) nor takes the write lock, so neither Close nor another
// process's writer waits on it. When this is the last connection to the file,
// SQLite's own close then completes the checkpoint and removes the WAL. A
// read-only store closes its connections and checkpoints nothing.
func (s *Store) Close() error {
	s.closeM.Lock()
	defer s.closeM.Unlock()
	s.sendM.Lock()
	already := s.closed.Swap(true)
	s.sendM.Unlock()
	if already {
		return nil
	}
	if s.readOnly {
		return s.rdb.Close()
	}
	// Every sender that passed the closed check has its op in the channel
	// once sendWG is done; the writer drains the channel before it exits.
	s.sendWG.Wait()
	var errs []error
	if s.lc != nil {
		// A last batch applies any observed shift and records the alive time.
		if err := s.lc.last(s); err != nil {
			errs = append(errs, err)
		}
	}
	close(s.quit)
	s.wg.Wait()
	if err := s.checkFiles(); err != nil {
		// A checkpoint now, or SQLite's own when the last connection closes,
		// would copy pages by the index of a -shm that is no longer the
		// database's and could overwrite what another process wrote through
		// the new one. The connections stay open until the process exits;
		// the WAL keeps every acknowledged write for the next opener.
		s.log.Error("database files were replaced while open: closing without a checkpoint", "database", s.path)
		return errors.Join(append(errs, fmt.Errorf("close database %s without a checkpoint: %w", s.path, err))...)
	}
	if _, err := s.wdb.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		errs = append(errs, fmt.Errorf("checkpoint WAL: %w", err))
	}
	if err := s.rdb.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := s.wdb.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Ping checks that the database answers a read.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	var one int
	return s.rdb.QueryRowContext(ctx, `SELECT 1 FROM schema_version`).Scan(&one)
}

// CheckResult reports Check.
type CheckResult struct {
	// Integrity is "ok" or the problems PRAGMA integrity_check found.
	Integrity []string
	// Checkpointed reports whether a checkpoint ran: false on a read-only
	// store, which only reports WALBytes.
	Checkpointed bool
	// WAL checkpoint figures when Checkpointed: busy (1 if it could not
	// finish), frames in the WAL, frames moved into the database. The
	// checkpoint is PASSIVE, so frames a reader still needs stay in the WAL
	// (CheckpointedFrames < WALFrames) rather than anyone waiting.
	CheckpointBusy, WALFrames, CheckpointedFrames int
	// WALBytes is the size of the -wal file after the check.
	WALBytes int64
}

// OK reports whether the integrity check found nothing wrong.
func (r CheckResult) OK() bool { return len(r.Integrity) == 1 && r.Integrity[0] == "ok" }

// Check runs PRAGMA integrity_check and, on a read-write store, a PASSIVE WAL
// checkpoint, which copies what no reader still needs and never waits for a
// reader or blocks a writer. A read-only store checkpoints nothing and
// reports the WAL's size.
func (s *Store) Check(ctx context.Context) (CheckResult, error) {
	var res CheckResult
	rows, err := s.rdb.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return res, fmt.Errorf("integrity check: %w", err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return res, err
		}
		res.Integrity = append(res.Integrity, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("integrity check: %w", err)
	}
	if !s.readOnly {
		// A checkpoint cannot run inside a transaction; it runs on the
		// writer's connection between batches.
		err = s.writerConn(ctx, func(c *sql.Conn) error {
			return c.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&res.CheckpointBusy, &res.WALFrames, &res.CheckpointedFrames)
		})
		if err != nil {
			return res, fmt.Errorf("WAL checkpoint: %w", err)
		}
		res.Checkpointed = true
	}
	if res.WALBytes, err = s.walBytes(); err != nil {
		return res, err
	}
	return res, nil
}
