package tgpostgres

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Defaults of Options.
const (
	// DefaultMaxConns bounds the pool when Options.MaxConns is 0.
	DefaultMaxConns = 16
	// DefaultAcquireTimeout is how long a write waits for a pooled
	// connection when Options.AcquireTimeout is 0.
	DefaultAcquireTimeout = 5 * time.Second
	// DefaultWatchInterval is the poll period when LISTEN is unsupported and
	// Options.WatchInterval is 0.
	DefaultWatchInterval = time.Second
	// DefaultCalibrateInterval is how often the clock offset is measured
	// again when Options.CalibrateInterval is 0.
	DefaultCalibrateInterval = 5 * time.Second
	// MaxWriteTries bounds the runs of one Write's function when the
	// database reports a serialization failure, a deadlock or a unique
	// violation.
	MaxWriteTries = 10
	// DefaultIdleInTransactionTimeout is the session's
	// idle_in_transaction_session_timeout when
	// Options.IdleInTransactionTimeout is 0: the longest a replica that
	// stopped or lost its network in the middle of a transaction holds its
	// locks. The driver's transactions run their statements back to back,
	// milliseconds apart, so only a frozen, partitioned or starved replica
	// stays idle inside one for seconds.
	DefaultIdleInTransactionTimeout = 3 * time.Second
	// DefaultLockTimeout is the session's lock_timeout when
	// Options.LockTimeout is 0: a statement waiting longer for a row lock
	// another transaction holds gives up with tgdriver.ErrBusy. A stalled
	// replica's locks go within DefaultIdleInTransactionTimeout, so a write
	// queued behind one gets the lock and is judged at its arrival (a
	// heartbeat keeps its lease); a longer wait means a queue of live
	// transactions on a hot row, which on a loaded host exceeded 5 s
	// (TestClaimStormLeavesHoldersLive), and waiting in it costs a holder
	// nothing. So the bound is where an answer is still useful: half the
	// default lease, a quarter of the default call deadline.
	DefaultLockTimeout = 15 * time.Second
	// DefaultKeepAlive is the TCP keepalive idle time and interval on the
	// driver's connections (this side's sockets, and the server's
	// tcp_keepalives_idle and tcp_keepalives_interval with
	// tcp_keepalives_count 3) when Options.KeepAlive is 0: a peer that
	// vanished without closing the connection is noticed within about
	// four of these.
	DefaultKeepAlive = 5 * time.Second
)

// Options configure Open. Zero values take the defaults.
type Options struct {
	// MaxConns and MinConns bound the connection pool (MaxConns default
	// DefaultMaxConns, MinConns default 0). The listener uses one more
	// connection of its own.
	MaxConns int32
	MinConns int32
	// AcquireTimeout: a write that cannot get a pooled connection within it
	// fails with tgdriver.ErrBusy (default DefaultAcquireTimeout).
	AcquireTimeout time.Duration
	// Logger receives the driver's logs (default: discarded). It never
	// receives the URL's password.
	Logger *slog.Logger
	// WatchInterval is the poll period of the fallback watch, used only when
	// the database does not support LISTEN (default DefaultWatchInterval).
	WatchInterval time.Duration
	// ReplicaID names this process among the replicas on the database
	// (default: random). Notifications it sent itself are not delivered
	// back to it on Changes.
	ReplicaID string
	// LocalClock is the local time that Clock corrects to the database's
	// (default: the process's monotonic clock, anchored to its wall clock at
	// Open). Tests inject a skewed clock here.
	LocalClock lease.Clock
	// CalibrateInterval is how often Clock measures its offset to the
	// database's clock again (default DefaultCalibrateInterval).
	CalibrateInterval time.Duration
	// ReadOnly opens the database for reading only (operator commands that
	// only read): no migration (a schema other than this binary's newest is
	// refused: schema.ErrTooOld, schema.ErrTooNew), every session is
	// default_transaction_read_only, no listener runs, Info().ReadOnly is set
	// and every Write fails with tgdriver.ErrReadOnlyStore.
	ReadOnly bool

	// IdleInTransactionTimeout ends a session that stays idle inside a
	// transaction for longer (idle_in_transaction_session_timeout), so that
	// a replica frozen (SIGSTOP, a VM pause) or cut off in the middle of a
	// transaction releases its locks (default
	// DefaultIdleInTransactionTimeout; negative: no limit).
	IdleInTransactionTimeout time.Duration
	// LockTimeout bounds a statement's wait for a lock another transaction
	// holds (lock_timeout); beyond it the write fails with tgdriver.ErrBusy,
	// nothing written (default DefaultLockTimeout; negative: no limit).
	LockTimeout time.Duration
	// StatementTimeout bounds every statement (statement_timeout); beyond it
	// the statement fails with tgdriver.ErrBusy (default 0: the server's
	// setting). The driver's writes are short and their lock waits bounded
	// by LockTimeout, so the limit matters only for long reads.
	StatementTimeout time.Duration
	// KeepAlive is the TCP keepalive idle time and probe interval of the
	// connections, on this side and asked of the server where the session
	// may set it (default DefaultKeepAlive; negative: the systems' defaults).
	KeepAlive time.Duration

	// listenSQL replaces the LISTEN statement, for tests of the fallback
	// poll of a database without LISTEN.
	listenSQL string
}

// Driver is the PostgreSQL tgdriver.Driver. It is safe for concurrent use.
type Driver struct {
	pool      *pgxpool.Pool
	connCfg   *pgx.ConnConfig
	opts      Options
	log       *slog.Logger
	location  string
	password  string
	replicaID string
	updates   *updateCache
	clock     *dbClock

	hooksMu sync.RWMutex
	hooks   tgdriver.Hooks

	changes  chan tgdriver.Change
	pending  pendingChange
	noNotify atomic.Bool
	// replicas is the last count of the replicas on the database
	// (replicas.go); 0 before the first.
	replicas atomic.Int64

	closed    atomic.Bool
	closeOnce sync.Once
	stop      context.CancelFunc
	wg        sync.WaitGroup
}

// The PostgreSQL driver has the optional capabilities SharedClock and
// ReplicaCounter.
var (
	_ tgdriver.Driver         = (*Driver)(nil)
	_ tgdriver.SharedClock    = (*Driver)(nil)
	_ tgdriver.ReplicaCounter = (*Driver)(nil)
)

// Open connects to the PostgreSQL database at rawURL (postgres:// or
// postgresql://), migrates it to the newest schema under an advisory lock,
// calibrates the clock and starts the listener. Errors never hold the URL's
// password.
func Open(ctx context.Context, rawURL string, opts Options) (*Driver, error) {
	location, password, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrBadURL, location, redactErr(err, password))
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.MinConns < 0 || opts.MinConns > opts.MaxConns {
		return nil, fmt.Errorf("%w: MinConns is %d, it must be between 0 and MaxConns (%d)", ErrBadOptions, opts.MinConns, opts.MaxConns)
	}
	if opts.AcquireTimeout <= 0 {
		opts.AcquireTimeout = DefaultAcquireTimeout
	}
	if opts.WatchInterval <= 0 {
		opts.WatchInterval = DefaultWatchInterval
	}
	if opts.CalibrateInterval <= 0 {
		opts.CalibrateInterval = DefaultCalibrateInterval
	}
	if opts.ReplicaID == "" {
		var b [8]byte
		_, _ = crand.Read(b[:])
		opts.ReplicaID = hex.EncodeToString(b[:])
	}
	if strings.ContainsAny(opts.ReplicaID, " \t\n") {
		return nil, fmt.Errorf("%w: ReplicaID %q has white space; use letters, digits and punctuation", ErrBadOptions, opts.ReplicaID)
	}
	if opts.LocalClock == nil {
		opts.LocalClock = newMonotonicWall()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.MaxConns, cfg.MinConns = opts.MaxConns, opts.MinConns
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "graph-engineering-mcp"
	}
	if opts.ReadOnly {
		// A second guard beside Write's refusal: the database itself
		// refuses any write on these sessions.
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	settings, optional := sessionSettings(opts, cfg.ConnConfig.RuntimeParams)
	if ka := defaulted(opts.KeepAlive, DefaultKeepAlive); ka > 0 {
		dialer := &net.Dialer{Timeout: cfg.ConnConfig.ConnectTimeout,
			KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: ka, Interval: ka, Count: 3}}
		cfg.ConnConfig.DialFunc = dialer.DialContext
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		registerArrays(c.TypeMap())
		return applySessionSettings(ctx, c, settings, optional, log)
	}
	d := &Driver{
		connCfg:   cfg.ConnConfig.Copy(),
		opts:      opts,
		log:       log.With("driver", "postgres", "database", location),
		location:  location,
		password:  password,
		replicaID: opts.ReplicaID,
		updates:   newUpdateCache(),
		changes:   make(chan tgdriver.Change, 1),
	}
	d.pending.signal = make(chan struct{}, 1)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", location, d.classify(ctx, err))
	}
	d.pool = pool
	if opts.ReadOnly {
		err = d.requireLatest(ctx)
	} else {
		err = d.migrate(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	d.clock = newDBClock(opts.LocalClock, d.sampleClock)
	if err := d.clock.calibrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("read the database clock of %s: %w", location, d.classify(ctx, err))
	}
	bg, stop := context.WithCancel(context.Background())
	d.stop = stop
	if opts.ReadOnly {
		d.wg.Add(1)
		go d.recalibrate(bg)
		return d, nil
	}
	d.wg.Add(4)
	ready := make(chan struct{})
	go d.listen(bg, ready)
	go d.pump(bg)
	go d.recalibrate(bg)
	go d.watchReplicas(bg)
	// Wait for the listener's first LISTEN, so that no notification sent
	// after Open returned is missed (and NotifyReady knows whether the
	// database has NOTIFY). If it cannot connect, it keeps trying and
	// reports Unknown once it does.
	select {
	case <-ready:
	case <-ctx.Done():
	case <-time.After(opts.AcquireTimeout):
	}
	return d, nil
}

// defaulted is d, or def when d is 0, or 0 (no limit) when d is negative.
func defaulted(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// sessionSettings are the settings every pooled session gets (see Options):
// the bounds on holding and waiting for locks, which the driver needs, and
// the server side's TCP keepalives, which a session may not be able to set
// (a Unix socket, an engine without them). A setting the URL already gives
// (a runtime parameter) is left to it.
func sessionSettings(opts Options, fromURL map[string]string) (required, optional [][2]string) {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	add := func(to *[][2]string, name, value string) {
		if _, ok := fromURL[name]; !ok {
			*to = append(*to, [2]string{name, value})
		}
	}
	add(&required, "idle_in_transaction_session_timeout", ms(defaulted(opts.IdleInTransactionTimeout, DefaultIdleInTransactionTimeout)))
	add(&required, "lock_timeout", ms(defaulted(opts.LockTimeout, DefaultLockTimeout)))
	if opts.StatementTimeout != 0 {
		add(&required, "statement_timeout", ms(defaulted(opts.StatementTimeout, 0)))
	}
	if ka := defaulted(opts.KeepAlive, DefaultKeepAlive); ka > 0 {
		secs := strconv.FormatInt(max(1, int64(ka/time.Second)), 10)
		add(&optional, "tcp_keepalives_idle", secs)
		add(&optional, "tcp_keepalives_interval", secs)
		add(&optional, "tcp_keepalives_count", "3")
	}
	return required, optional
}

// applySessionSettings sets the required settings on a new session (an
// error refuses the connection) and the optional ones where the server
// accepts them.
func applySessionSettings(ctx context.Context, c *pgx.Conn, required, optional [][2]string, log *slog.Logger) error {
	for _, s := range required {
		if _, err := c.Exec(ctx, `SELECT set_config($1, $2, false)`, s[0], s[1]); err != nil {
			return fmt.Errorf("set %s: %w", s[0], err)
		}
	}
	for _, s := range optional {
		if _, err := c.Exec(ctx, `SELECT set_config($1, $2, false)`, s[0], s[1]); err != nil {
			log.Debug("session setting not applied", "setting", s[0], "err", err)
		}
	}
	return nil
}

// ErrBadOptions means Options hold a value out of range.
var ErrBadOptions = errors.New("invalid PostgreSQL driver options")

// parseURL checks the scheme and returns the URL without its password, for
// logs and errors, and the password, to scrub from error texts.
func parseURL(raw string) (location, password string, err error) {
	u, perr := url.Parse(raw)
	if perr != nil {
		return "", "", fmt.Errorf("%w: it cannot be parsed as a URL; give postgres://user:password@host:port/database", ErrBadURL)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", "", fmt.Errorf("%w: scheme %q; use postgres:// or postgresql://", ErrBadURL, u.Scheme)
	}
	if u.User != nil {
		password, _ = u.User.Password()
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	if p := q.Get("password"); p != "" {
		password = p
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String(), password, nil
}

// Info describes the driver.
func (d *Driver) Info() tgdriver.Info {
	return tgdriver.Info{Name: "postgres", Location: d.location, ReadOnly: d.opts.ReadOnly, Connections: int(d.opts.MaxConns), JournalEvents: true}
}

// ReplicaID returns this driver's replica id.
func (d *Driver) ReplicaID() string { return d.replicaID }

// Clock returns the replicas' shared clock: the local clock corrected by
// this process's measured offset to the database's clock_timestamp().
func (d *Driver) Clock() lease.Clock { return d.clock }

// Start records the domain's hooks. BatchStart is never called (the
// driver is a tgdriver.SharedClock).
func (d *Driver) Start(h tgdriver.Hooks) error {
	if d.closed.Load() {
		return tgdriver.ErrClosed
	}
	d.hooksMu.Lock()
	d.hooks = h
	d.hooksMu.Unlock()
	return nil
}

// Write runs fn in one READ COMMITTED transaction, again (up to
// MaxWriteTries runs) when the database reports a serialization failure, a
// deadlock or a unique violation, or fn a row changed under it
// (tgdriver.ErrRowChanged).
func (d *Driver) Write(ctx context.Context, fn func(tgdriver.Tx) error) error {
	if d.closed.Load() {
		return tgdriver.ErrClosed
	}
	if d.opts.ReadOnly {
		return fmt.Errorf("%w: %s was opened read-only", tgdriver.ErrReadOnlyStore, d.location)
	}
	d.hooksMu.RLock()
	onBatch := d.hooks.OnBatch
	d.hooksMu.RUnlock()
	var err error
	for try := 1; ; try++ {
		start := time.Now()
		err = d.writeOnce(ctx, fn)
		if onBatch != nil {
			onBatch(1, time.Since(start), err)
		}
		if err == nil || !retryable(err) || try >= MaxWriteTries || ctx.Err() != nil {
			break
		}
		d.log.Debug("write retried", "try", try, "sqlstate", sqlState(err))
		// Jittered, growing backoff: 1-2 ms, 2-4 ms, ... capped near 100 ms.
		base := time.Duration(1<<min(try-1, 6)) * time.Millisecond
		t := time.NewTimer(base + rand.N(base))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if err != nil && retryable(err) {
		return fmt.Errorf("write gave up after %d tries: %w", MaxWriteTries, d.classify(ctx, err))
	}
	return err
}

func (d *Driver) writeOnce(ctx context.Context, fn func(tgdriver.Tx) error) error {
	conn, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	c := &txConn{conn: conn.Conn()}
	w := &wtx{reads: reads{d: d, q: c}, c: c}
	if err := fn(w); err != nil {
		c.rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := c.commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", d.classifyCommit(ctx, err))
	}
	return nil
}

// acquire takes a pooled connection within AcquireTimeout: ErrBusy when
// every connection stayed in use, ErrUnreachable when a new one could not be
// opened.
func (d *Driver) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, d.opts.AcquireTimeout)
	defer cancel()
	conn, err := d.pool.Acquire(actx)
	if err == nil {
		return conn, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if d.closed.Load() {
		return nil, tgdriver.ErrClosed
	}
	if actx.Err() != nil && d.pool.Stat().AcquiredConns() >= d.opts.MaxConns {
		return nil, fmt.Errorf("%w: all %d connections of the pool stayed in use for %s (raise the pool's MaxConns or lower the load)",
			tgdriver.ErrBusy, d.opts.MaxConns, d.opts.AcquireTimeout)
	}
	if actx.Err() != nil {
		return nil, fmt.Errorf("%w (%s): no connection could be opened within %s", tgdriver.ErrUnreachable, d.location, d.opts.AcquireTimeout)
	}
	return nil, fmt.Errorf("acquire a connection: %w", d.classify(ctx, err))
}

// Reads answers reads on committed state through the pool.
func (d *Driver) Reads() tgdriver.Reads { return reads{d: d, q: d.pool} }

// Snapshot runs fn in one REPEATABLE READ READ ONLY transaction.
func (d *Driver) Snapshot(ctx context.Context, fn func(tgdriver.Reads) error) error {
	if d.closed.Load() {
		return tgdriver.ErrClosed
	}
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin a snapshot: %w", d.classify(ctx, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return fn(reads{d: d, q: tx})
}

// Changes delivers notifications of other replicas' writes.
func (d *Driver) Changes() <-chan tgdriver.Change { return d.changes }

// Ready commits a write that changes nothing, to tell whether the database
// accepts writes now.
func (d *Driver) Ready(ctx context.Context) error {
	if d.closed.Load() {
		return tgdriver.ErrClosed
	}
	conn, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return d.classify(ctx, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `UPDATE schema_version SET applied_at_ms = applied_at_ms WHERE singleton = 1`); err != nil {
		return d.classify(ctx, err)
	}
	return d.classify(ctx, tx.Commit(ctx))
}

// Ping checks that the database answers a read.
func (d *Driver) Ping(ctx context.Context) error {
	if d.closed.Load() {
		return tgdriver.ErrClosed
	}
	var one int
	return d.classify(ctx, d.pool.QueryRow(ctx, `SELECT 1`).Scan(&one))
}

// Close stops the listener and the clock, and closes the pool once the
// writes in flight have finished. It is safe to call more than once.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		d.stop()
		d.wg.Wait()
		d.pool.Close()
	})
	return nil
}
