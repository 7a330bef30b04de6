package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// driverName is go-sqlite3 with a connect hook for the settings its DSN
// cannot express; every connection of the driver is opened through it.
const driverName = "sqlite3_tgsqlite"

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

// DefaultBusyTimeout is how long a write waits for another process's write
// lock before it fails with tgdriver.ErrBusy, when Options.BusyTimeout is 0.
// It is well under the shortest useful lease (lease.DefaultDuration is 30 s),
// so a heartbeat that meets a lock learns so while its lease still runs.
const DefaultBusyTimeout = 10 * time.Second

// ErrInvalidOption matches the error Open and OpenReadOnly return for a
// missing path or an unknown option value.
var ErrInvalidOption = errors.New("invalid option")

// Options configure Open. The zero value is usable.
type Options struct {
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
	// WatchInterval is how often the driver looks for writes by other
	// processes (Changes) and checks that its database files are still the
	// ones it opened; 0 means 500 ms.
	WatchInterval time.Duration
}

// readDefaults fills in the options every driver uses, read-only ones too:
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

// Driver is the SQLite tgdriver.Driver. It is safe for concurrent use.
type Driver struct {
	path string
	opts Options
	log  *slog.Logger
	wdb  *sql.DB // exactly one connection, owned by the writer goroutine
	rdb  *sql.DB
	// rstmts keeps the read pool's statements prepared (readStmts).
	rstmts *readStmts
	reads  *reads // reads on rdb, outside any transaction
	ops    chan *op
	quit   chan struct{} // closed by Close to stop background loops
	wg     sync.WaitGroup
	hooks  atomic.Pointer[tgdriver.Hooks]
	// started is set by Start; the writer goroutine runs from Open.
	started atomic.Bool
	closed  atomic.Bool
	// closeM serialises Close.
	closeM sync.Mutex
	// sendM orders submit's closed check and sendWG.Add against Close setting
	// closed; it is held only for those few instructions.
	sendM   sync.Mutex
	sendWG  sync.WaitGroup // senders between the closed check and the channel send
	changes chan tgdriver.Change
	// readOnly: opened by OpenReadOnly; wdb is nil, no background loop runs.
	readOnly bool
	files    fileGuard // identity of the database files (health.go)
	// updates caches the updates' SQL text by shape, with the row
	// returned (UpdateTask, Fetch) or not (Apply); writer goroutine only.
	updates map[updateKey]string
	// ckpt runs the WAL checkpoints off the writer (ckpt.go); nil when
	// read-only.
	ckpt *checkpointer
}

// The SQLite driver has no optional capability (tgdriver's caps.go): its
// Backup, Check and Checkpoint are its own, called by the CLI.
var _ tgdriver.Driver = (*Driver)(nil)

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

// fileDSN is the data source name of the database file at path with the
// connection parameters q.
func fileDSN(path string, q url.Values) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

func msString(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// Open opens (creating if needed) the database at path, applies pending
// migrations, and starts the writer and the change watcher. Its parent
// folder is created with mode 0700 if missing. Call Start before Write.
func Open(ctx context.Context, path string, opts Options) (*Driver, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: database: a path is required", ErrInvalidOption)
	}
	switch opts.Sync {
	case "":
		opts.Sync = SyncFull
	case SyncFull, SyncNormal:
	default:
		return nil, fmt.Errorf("%w: sync: must be %q or %q (got %q)", ErrInvalidOption, SyncFull, SyncNormal, opts.Sync)
	}
	opts.readDefaults()
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.WatchInterval <= 0 {
		opts.WatchInterval = 500 * time.Millisecond
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, refineOpenErr(path, fmt.Errorf("create database folder %s: %w", dir, err))
		}
	}
	d := &Driver{path: path, opts: opts, log: opts.Logger, ops: make(chan *op, 1024), quit: make(chan struct{}),
		changes: make(chan tgdriver.Change, 1), updates: make(map[updateKey]string)}
	err := retryBusy(ctx, opts.BusyTimeout, func() error {
		if err := inspect(ctx, path, opts); err != nil {
			return err
		}
		var err error
		if d.wdb, err = openDB(path, opts, false); err != nil {
			return err
		}
		if err := d.migrate(ctx); err != nil {
			d.wdb.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, refineOpenErr(path, d.classify(err))
	}
	if d.rdb, err = openDB(path, opts, true); err != nil {
		d.wdb.Close()
		return nil, err
	}
	// The read pool gets one extra connection, held by the change watcher.
	d.rdb.SetMaxOpenConns(opts.ReadConns + 1)
	d.rdb.SetMaxIdleConns(opts.ReadConns + 1)
	d.rstmts = newReadStmts(d.rdb)
	d.reads = &reads{q: poolQuerier{d.rstmts}}
	// Recorded before the change watcher starts: it checks them too.
	if err := d.recordFiles(); err != nil {
		d.rdb.Close()
		d.wdb.Close()
		return nil, err
	}
	if err := d.startWatch(ctx); err != nil {
		d.rdb.Close()
		d.wdb.Close()
		return nil, err
	}
	if err := d.startCheckpointer(); err != nil {
		close(d.quit)
		d.wg.Wait()
		d.rdb.Close()
		d.wdb.Close()
		return nil, err
	}
	d.wg.Add(1)
	go d.writer()
	return d, nil
}

// retryBusy runs step until it succeeds, fails with anything but
// SQLITE_BUSY or SQLITE_LOCKED, or busyTimeout has passed since the first
// try. SQLite answers SQLITE_BUSY at once, without waiting in its busy
// handler, where waiting could deadlock: two connections turning a new file
// to WAL mode at the same moment, or a connection that holds a read lock and
// asks for the write lock while another holds it. Several servers started
// together on a new database meet exactly that. Each step writes all or
// nothing (the journal mode change and the migration are atomic), so
// repeating one after such an answer is safe.
func retryBusy(ctx context.Context, busyTimeout time.Duration, step func() error) error {
	deadline := time.Now().Add(busyTimeout)
	for try := 1; ; try++ {
		err := step()
		var se sqlite3.Error
		if err == nil || !errors.As(err, &se) || (se.Code != sqlite3.ErrBusy && se.Code != sqlite3.ErrLocked) || !time.Now().Before(deadline) {
			return err
		}
		// Jittered, growing pauses of 2-4 ms up to 64-128 ms.
		base := time.Duration(2<<min(try-1, 5)) * time.Millisecond
		t := time.NewTimer(min(base+rand.N(base), time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-t.C:
		}
	}
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
	q.Set("_busy_timeout", msString(opts.BusyTimeout))
	q.Set("_query_only", "on")
	db, err := sql.Open(driverName, fileDSN(path, q))
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := inspectSchema(ctx, db); err != nil {
		return fmt.Errorf("open database %s: %w", path, describeOpenErr(err))
	}
	return nil
}

// openDB opens a pool on path and verifies every pragma the driver relies on.
func openDB(path string, opts Options, readOnly bool) (*sql.DB, error) {
	q := url.Values{}
	// WAL: readers never block the writer and the writer never blocks readers.
	q.Set("_journal_mode", "WAL")
	// Wait for another process's lock instead of failing at once with SQLITE_BUSY.
	q.Set("_busy_timeout", msString(opts.BusyTimeout))
	// Edges and tasks reference each other; the database enforces it.
	q.Set("_foreign_keys", "on")
	if readOnly {
		q.Set("_query_only", "on")
		q.Set("_txlock", "deferred")
	} else {
		q.Set("_synchronous", string(opts.Sync))
		// database/sql's Begin starts BEGIN IMMEDIATE (the migration): the
		// write lock is taken before the first read.
		q.Set("_txlock", "immediate")
	}
	db, err := sql.Open(driverName, fileDSN(path, q))
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

// verifyPragmas checks that the connection really is in WAL mode, enforces
// foreign keys and, for the writer, syncs as opts.Sync says: a DSN
// parameter SQLite could not apply must not pass silently.
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

func (d *Driver) migrate(ctx context.Context) error {
	tx, err := d.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", d.path, describeOpenErr(err))
	}
	defer tx.Rollback()
	from, to, err := apply(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", d.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", d.path, err)
	}
	if from != to {
		d.log.Info("database schema migrated", "path", d.path, "from", from, "to", to)
	}
	return nil
}

// Info describes the driver: Name "sqlite", Location the file path.
func (d *Driver) Info() tgdriver.Info {
	return tgdriver.Info{Name: "sqlite", Location: d.path, ReadOnly: d.readOnly}
}

// Path returns the database file path.
func (d *Driver) Path() string { return d.path }

// Start installs the domain's hooks. It is called once, before any Write;
// a second call is an error.
func (d *Driver) Start(h tgdriver.Hooks) error {
	if d.started.Swap(true) {
		return errors.New("tgsqlite: Start was called twice; it installs the hooks once, before any write")
	}
	d.hooks.Store(&h)
	return nil
}

// Reads answers reads on committed state through the read pool.
func (d *Driver) Reads() tgdriver.Reads { return d.reads }

// Snapshot runs fn on one read transaction of the read pool: every read of
// fn sees the same committed state.
func (d *Driver) Snapshot(ctx context.Context, fn func(tgdriver.Reads) error) error {
	if d.closed.Load() {
		return tgdriver.ErrClosed
	}
	// Before it holds a connection: preparing takes one (readStmts).
	d.rstmts.prepareWanted(ctx)
	tx, err := d.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read snapshot: %w", err)
	}
	defer tx.Rollback()
	// A deferred transaction takes its snapshot at its first read: read now,
	// so the snapshot is the state when Snapshot was called.
	q := txQuerier{tx, d.rstmts}
	var one int
	if err := q.queryRow(ctx, `SELECT 1 FROM schema_version LIMIT 1`).Scan(&one); err != nil {
		return fmt.Errorf("begin read snapshot: %w", err)
	}
	return fn(&reads{q: q})
}

// Changes delivers a value after the database changed through another
// connection (PRAGMA data_version; the driver's own commits may show there
// too). Changes coalesce. Nil for a read-only driver.
func (d *Driver) Changes() <-chan tgdriver.Change {
	if d.readOnly {
		return nil
	}
	return d.changes
}

// Close stops accepting writes, finishes those already queued, stops the
// watcher, checkpoints the WAL into the database file as far as readers
// allow and closes it. It is safe to call more than once.
//
// The checkpoint is PASSIVE: it copies what no reader still needs and never
// waits for a reader (a long audit verify, db backup or sqlite3 shell in
// another process) nor takes the write lock, so neither Close nor another
// process's writer waits on it. When this is the last connection to the file,
// SQLite's own close then completes the checkpoint and removes the WAL. A
// read-only driver closes its connections and checkpoints nothing.
func (d *Driver) Close() error {
	d.closeM.Lock()
	defer d.closeM.Unlock()
	d.sendM.Lock()
	already := d.closed.Swap(true)
	d.sendM.Unlock()
	if already {
		return nil
	}
	if d.readOnly {
		d.rstmts.close()
		return d.rdb.Close()
	}
	// Every sender that passed the closed check has its op in the channel
	// once sendWG is done; the writer drains the channel before it exits.
	d.sendWG.Wait()
	close(d.quit)
	d.wg.Wait()
	if err := d.checkFiles(); err != nil {
		// A checkpoint now, or SQLite's own when the last connection closes,
		// would copy pages by the index of a -shm that is no longer the
		// database's and could overwrite what another process wrote through
		// the new one. The connections stay open until the process exits;
		// the WAL keeps every acknowledged write for the next opener.
		d.log.Error("database files were replaced while open: closing without a checkpoint", "database", d.path)
		return fmt.Errorf("close database %s without a checkpoint: %w", d.path, err)
	}
	var errs []error
	if _, err := d.wdb.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		errs = append(errs, fmt.Errorf("checkpoint WAL: %w", err))
	}
	if err := d.ckpt.db.Close(); err != nil {
		errs = append(errs, err)
	}
	d.rstmts.close()
	if err := d.rdb.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := d.wdb.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Ping checks that the database answers a read.
func (d *Driver) Ping(ctx context.Context) error {
	if d.closed.Load() {
		return tgdriver.ErrClosed
	}
	var one int
	return d.rdb.QueryRowContext(ctx, `SELECT 1 FROM schema_version`).Scan(&one)
}

// CheckResult reports Check.
type CheckResult struct {
	// Integrity is "ok" or the problems PRAGMA integrity_check found.
	Integrity []string
	// Checkpointed reports whether a checkpoint ran: false on a read-only
	// driver, which only reports WALBytes.
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

// Check runs PRAGMA integrity_check and, on a read-write driver, a PASSIVE
// WAL checkpoint, which copies what no reader still needs and never waits
// for a reader or blocks a writer. A read-only driver checkpoints nothing and
// reports the WAL's size.
func (d *Driver) Check(ctx context.Context) (CheckResult, error) {
	var res CheckResult
	if d.closed.Load() {
		return res, tgdriver.ErrClosed
	}
	rows, err := d.rdb.QueryContext(ctx, `PRAGMA integrity_check`)
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
	if !d.readOnly {
		// A checkpoint cannot run inside a transaction; it runs on the
		// writer's connection between batches.
		err = d.writerConn(ctx, func(c *sql.Conn) error {
			return c.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&res.CheckpointBusy, &res.WALFrames, &res.CheckpointedFrames)
		})
		if err != nil {
			return res, fmt.Errorf("WAL checkpoint: %w", err)
		}
		res.Checkpointed = true
	}
	if res.WALBytes, err = walBytes(d.path); err != nil {
		return res, err
	}
	return res, nil
}
