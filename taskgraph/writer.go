package taskgraph

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/mattn/go-sqlite3"
)

// op is one unit of work for the writer goroutine. Exactly one of fn and raw
// is set: fn runs inside a savepoint of the batch transaction, raw runs alone
// on the writer's connection between batches (for statements such as
// checkpoints that cannot run inside a transaction).
type op struct {
	ctx  context.Context
	fn   func(*wtx) error
	raw  func(*sql.Conn) error
	err  error
	done chan struct{}
}

// wtx is what an operation sees: the writer's connection, inside the batch
// transaction and the operation's savepoint, and server time.
type wtx struct {
	ctx   context.Context
	stmts *stmtCache
	now   time.Time
	nowMS int64
	// judged is the time a holder write is judged at (see holderWrite).
	judged time.Time
	s      *Store
	// hooks run after the batch commits, in order, only if this operation's
	// savepoint was released and the commit succeeded.
	hooks []func()
	// ready lists the workflow of each task this operation made claimable.
	ready []string
}

// afterCommit registers fn to run once the batch holding this operation has
// committed. fn must not block.
func (w *wtx) afterCommit(fn func()) { w.hooks = append(w.hooks, fn) }

// wakeWaiters records that this operation made a task of workflowID
// claimable: once the batch commits, one claim-next waiter that may claim it
// is woken.
func (w *wtx) wakeWaiters(workflowID string) { w.ready = append(w.ready, workflowID) }

func (w *wtx) exec(query string, args ...any) (sql.Result, error) {
	st, err := w.stmts.get(w.ctx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return w.stmts.conn.ExecContext(w.ctx, query, args...)
	}
	return st.ExecContext(w.ctx, args...)
}

func (w *wtx) queryRow(query string, args ...any) *sql.Row {
	st, err := w.stmts.get(w.ctx, query)
	if err != nil || st == nil {
		// Not cached, or it does not compile: the Row reports that error.
		return w.stmts.conn.QueryRowContext(w.ctx, query, args...)
	}
	return st.QueryRowContext(w.ctx, args...)
}

func (w *wtx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := w.stmts.get(w.ctx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return w.stmts.conn.QueryContext(w.ctx, query, args...)
	}
	return st.QueryContext(w.ctx, args...)
}

// maxCachedStmts bounds stmtCache. The store's write statements are a fixed
// set of well under a hundred; the bound only guards against a bug that
// builds SQL text from data.
const maxCachedStmts = 256

// stmtCache holds the writer connection's prepared statements by SQL text,
// so that each statement is compiled once per connection instead of on every
// call (compiling an UPDATE of tasks, with its indexes, foreign keys and
// checks, cost more than running it). Only the writer goroutine uses it. The
// statements run on the connection directly: the writer opens and ends the
// batch transaction and savepoints itself, with statements of this cache,
// because database/sql would compile a connection's statement again for
// every transaction (Tx.StmtContext).
type stmtCache struct {
	conn *sql.Conn
	m    map[string]*sql.Stmt
}

func newStmtCache(conn *sql.Conn) *stmtCache {
	return &stmtCache{conn: conn, m: make(map[string]*sql.Stmt)}
}

// get returns the prepared statement for query, preparing it on first use;
// nil, nil when the cache is full and query is not in it.
func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	if st := c.m[query]; st != nil {
		return st, nil
	}
	if len(c.m) >= maxCachedStmts {
		return nil, nil
	}
	st, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.m[query] = st
	return st, nil
}

// control runs a transaction control statement (BEGIN, SAVEPOINT, ...).
func (c *stmtCache) control(ctx context.Context, query string) error {
	st, err := c.get(ctx, query)
	if err != nil {
		return err
	}
	if st == nil {
		_, err = c.conn.ExecContext(ctx, query)
		return err
	}
	_, err = st.ExecContext(ctx)
	return err
}

// inTransaction reports whether the connection is inside a transaction.
func (c *stmtCache) inTransaction() bool {
	in := false
	err := c.conn.Raw(func(dc any) error {
		if sc, ok := dc.(*sqlite3.SQLiteConn); ok {
			in = !sc.AutoCommit()
		}
		return nil
	})
	return err == nil && in
}

// close finalises every cached statement.
func (c *stmtCache) close() {
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// do runs fn as one operation of the next batch and returns its error once
// the batch has committed (or failed). A failed commit fails every operation
// of the batch. If ctx is done before the writer reaches the operation, it is
// skipped and ctx's error returned; once reached it runs to the end.
func (s *Store) do(ctx context.Context, fn func(*wtx) error) error {
	return s.submit(&op{ctx: ctx, fn: fn, done: make(chan struct{})})
}

// writerConn runs fn on the writer's connection outside any transaction,
// between batches.
func (s *Store) writerConn(ctx context.Context, fn func(*sql.Conn) error) error {
	return s.submit(&op{ctx: ctx, raw: fn, done: make(chan struct{})})
}

func (s *Store) submit(o *op) error {
	if s.readOnly {
		return s.errReadOnly()
	}
	// sendM, not closeM: Close holds closeM while it waits for the background
	// loops, and a loop that submits here during Close must get ErrClosed
	// rather than wait for Close.
	s.sendM.Lock()
	if s.closed.Load() {
		s.sendM.Unlock()
		return ErrClosed
	}
	s.sendWG.Add(1)
	s.sendM.Unlock()
	select {
	case s.ops <- o:
		s.sendWG.Done()
	case <-o.ctx.Done():
		s.sendWG.Done()
		return o.ctx.Err()
	}
	<-o.done
	return o.err
}

// writer owns the write connection. It takes the first waiting operation,
// then every other operation already waiting (up to MaxBatch), runs them in
// one transaction and commits once.
func (s *Store) writer() {
	defer s.wg.Done()
	ctx := context.Background()
	conn, connErr := s.wdb.Conn(ctx)
	var stmts *stmtCache
	if conn != nil {
		stmts = newStmtCache(conn)
		defer conn.Close()
		defer stmts.close()
	}
	batch := make([]*op, 0, s.opts.MaxBatch)
	var carry *op
	for {
		var first *op
		if carry != nil {
			first, carry = carry, nil
		} else {
			select {
			case first = <-s.ops:
			case <-s.quit:
				// Close waited for every sender; answer what is queued, then stop.
				for {
					select {
					case o := <-s.ops:
						s.runOne(ctx, stmts, connErr, o)
					default:
						return
					}
				}
			}
		}
		if first.raw != nil {
			s.runOne(ctx, stmts, connErr, first)
			continue
		}
		batch = append(batch[:0], first)
		// Let the callers the last commit just answered run first: most
		// submit their next operation at once, and it joins this batch
		// instead of waiting for the next commit.
		runtime.Gosched()
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case o := <-s.ops:
				if o.raw != nil {
					carry = o
					break fill
				}
				batch = append(batch, o)
			default:
				break fill
			}
		}
		s.runBatch(ctx, stmts, connErr, batch)
	}
}

func (s *Store) runOne(ctx context.Context, stmts *stmtCache, connErr error, o *op) {
	if o.raw == nil {
		s.runBatch(ctx, stmts, connErr, []*op{o})
		return
	}
	switch {
	case connErr != nil:
		o.err = fmt.Errorf("database connection: %w", connErr)
	case o.ctx.Err() != nil:
		o.err = o.ctx.Err()
	default:
		// A checkpoint through a replaced -shm would copy pages by a stale
		// index: once the files changed, nothing more runs on them.
		if o.err = s.checkFiles(); o.err == nil {
			o.err = s.classify(o.raw(stmts.conn))
		}
	}
	close(o.done)
}

// runBatch runs batch in one transaction, each operation in its own
// savepoint, and commits once. The transaction statements run on the
// connection itself (see stmtCache); BEGIN IMMEDIATE takes the write lock
// before the first read.
func (s *Store) runBatch(ctx context.Context, stmts *stmtCache, connErr error, batch []*op) {
	start := time.Now()
	var hooks []func()
	var ready []string
	// cause is the first ErrUnavailable error an operation met: when the
	// batch then fails as a whole with a less telling error (SQLite may roll
	// the transaction back itself on SQLITE_FULL), the callers get the cause.
	var cause error
	finish := func(err error) {
		err = s.classify(err)
		if err != nil && cause != nil && !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w (then: %v)", cause, err)
		}
		for _, o := range batch {
			if o.err == nil && err != nil {
				o.err = err
			}
			close(o.done)
		}
		if s.opts.OnBatch != nil {
			s.opts.OnBatch(len(batch), time.Since(start), err)
		}
	}
	if connErr != nil {
		finish(fmt.Errorf("database connection: %w", connErr))
		return
	}
	// rollback ends the transaction after a failure. SQLite may already have
	// rolled it back, and then ROLLBACK fails harmlessly.
	rollback := func() {
		err := stmts.control(ctx, `ROLLBACK`)
		if stmts.inTransaction() {
			s.log.Error("could not end a failed write transaction", "err", err)
		}
	}
	if stmts.inTransaction() {
		// Never expected: a transaction left open by a failure above. Its
		// writes were never acknowledged; drop them rather than commit them
		// with this batch.
		s.log.Error("the write connection was left inside a transaction; rolling it back")
		rollback()
	}
	// Never write through files that are no longer the database's.
	if err := s.checkFiles(); err != nil {
		finish(err)
		return
	}
	if err := stmts.control(ctx, `BEGIN IMMEDIATE`); err != nil {
		finish(fmt.Errorf("begin write transaction: %w", err))
		return
	}
	if s.lc != nil {
		// Give live leases the time the server was away before any operation
		// of the batch is judged.
		now := s.clock.Now().UTC()
		w := &wtx{ctx: ctx, stmts: stmts, now: now, nowMS: now.UnixMilli(), s: s}
		if err := s.lc.step(w); err != nil {
			rollback()
			finish(err)
			return
		}
		hooks = append(hooks, w.hooks...)
	}
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.err = err
			continue
		}
		if err := stmts.control(ctx, `SAVEPOINT op`); err != nil {
			rollback()
			finish(fmt.Errorf("open savepoint: %w", err))
			return
		}
		now := s.clock.Now().UTC()
		w := &wtx{ctx: ctx, stmts: stmts, now: now, nowMS: now.UnixMilli(), s: s}
		o.err = s.classify(runGuarded(w, o.fn))
		if o.err != nil {
			if cause == nil && errors.Is(o.err, ErrUnavailable) {
				cause = o.err
			}
			// Undo this operation only; the others of the batch stand.
			if err := stmts.control(ctx, `ROLLBACK TO op`); err != nil {
				rollback()
				finish(fmt.Errorf("roll back savepoint: %w", err))
				return
			}
		} else {
			hooks = append(hooks, w.hooks...)
			ready = append(ready, w.ready...)
		}
		if err := stmts.control(ctx, `RELEASE op`); err != nil {
			rollback()
			finish(fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if err := stmts.control(ctx, `COMMIT`); err != nil {
		// A failed COMMIT may leave the transaction open (SQLITE_BUSY); end it
		// so that nothing of this batch commits later with another.
		rollback()
		s.log.Error("commit failed; every operation of the batch failed", "ops", len(batch), "err", err)
		finish(fmt.Errorf("commit: %w", err))
		return
	}
	// A file removed or replaced while the batch ran means the commit went
	// to files that may no longer be the database's (another process may
	// checkpoint or reset the WAL through a new -shm): do not acknowledge it.
	if err := s.checkFiles(); err != nil {
		finish(fmt.Errorf("%w; this write reached the old files and may or may not have been kept: inspect before retrying against a restarted server", err))
		return
	}
	for _, h := range hooks {
		h()
	}
	s.notify.wakeAll(ready)
	finish(nil)
}

// runGuarded runs fn and turns a panic into an error, so one bad operation
// cannot stop the writer.
func runGuarded(w *wtx, fn func(*wtx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.s.log.Error("write operation panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: internal error in write operation: %v", errInternal, r)
		}
	}()
	return fn(w)
}

// errInternal marks a fault of the store itself rather than of the input.
var errInternal = errors.New("internal error")
