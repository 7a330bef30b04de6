package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// op is one unit of work for the writer goroutine. Exactly one of fn and raw
// is set: fn runs inside the batch transaction (in a savepoint of its own
// when the batch has more than one operation), raw runs alone on the
// writer's connection between batches (for statements such as checkpoints
// that cannot run inside a transaction).
type op struct {
	ctx  context.Context
	fn   func(tgdriver.Tx) error
	raw  func(*sql.Conn) error
	err  error
	done chan struct{}
}

// Write runs fn as one operation of the next batch and returns its error
// once the batch has committed (or failed). A failed commit fails every
// operation of the batch. If ctx is done before the writer reaches the
// operation, it is skipped and ctx's error returned; once reached it runs to
// the end. fn runs exactly once (SQLite never asks for a retry).
func (d *Driver) Write(ctx context.Context, fn func(tgdriver.Tx) error) error {
	return d.submit(&op{ctx: ctx, fn: fn, done: make(chan struct{})})
}

// writerConn runs fn on the writer's connection outside any transaction,
// between batches.
func (d *Driver) writerConn(ctx context.Context, fn func(*sql.Conn) error) error {
	return d.submit(&op{ctx: ctx, raw: fn, done: make(chan struct{})})
}

func (d *Driver) submit(o *op) error {
	if d.readOnly {
		return d.errReadOnly()
	}
	// sendM, not closeM: Close holds closeM while it waits for the writer.
	d.sendM.Lock()
	if d.closed.Load() {
		d.sendM.Unlock()
		return tgdriver.ErrClosed
	}
	d.sendWG.Add(1)
	d.sendM.Unlock()
	select {
	case d.ops <- o:
		d.sendWG.Done()
	case <-o.ctx.Done():
		d.sendWG.Done()
		return o.ctx.Err()
	}
	<-o.done
	return o.err
}

// writer owns the write connection. It takes the first waiting operation,
// then every other operation already waiting (up to MaxBatch), runs them in
// one transaction and commits once.
func (d *Driver) writer() {
	defer d.wg.Done()
	ctx := context.Background()
	conn, connErr := d.wdb.Conn(ctx)
	var stmts *stmtCache
	if conn != nil {
		stmts = newStmtCache(conn)
		defer conn.Close()
		defer stmts.close()
	}
	t := &wtx{d: d, stmts: stmts}
	t.reads.q = t
	batch := make([]*op, 0, d.opts.MaxBatch)
	var carry *op
	for {
		var first *op
		if carry != nil {
			first, carry = carry, nil
		} else {
			select {
			case first = <-d.ops:
			case <-d.quit:
				// Close waited for every sender; answer what is queued, then stop.
				for {
					select {
					case o := <-d.ops:
						d.runOne(t, connErr, o)
					default:
						return
					}
				}
			}
		}
		if first.raw != nil {
			d.runOne(t, connErr, first)
			continue
		}
		batch = append(batch[:0], first)
		// Let the callers the last commit just answered run first: most
		// submit their next operation at once, and it joins this batch
		// instead of waiting for the next commit.
		runtime.Gosched()
	fill:
		for len(batch) < d.opts.MaxBatch {
			select {
			case o := <-d.ops:
				if o.raw != nil {
					carry = o
					break fill
				}
				batch = append(batch, o)
			default:
				break fill
			}
		}
		d.runBatch(t, connErr, batch)
		clear(batch) // drop the references to answered operations
	}
}

func (d *Driver) runOne(t *wtx, connErr error, o *op) {
	if o.raw == nil {
		d.runBatch(t, connErr, []*op{o})
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
		if o.err = d.checkFiles(); o.err == nil {
			o.err = d.classify(o.raw(t.stmts.conn))
		}
	}
	close(o.done)
}

// The transaction control statements, prepared once in stmtCache.
const (
	sqlBegin      = `BEGIN IMMEDIATE`
	sqlCommit     = `COMMIT`
	sqlRollback   = `ROLLBACK`
	sqlSavepoint  = `SAVEPOINT op`
	sqlRollbackTo = `ROLLBACK TO op`
	sqlRelease    = `RELEASE op`
)

// runBatch runs batch in one transaction and commits once. With more than
// one operation to run, each runs in its own savepoint, so that a failed one
// is undone alone. A batch of one operation runs without a savepoint: the
// transaction itself is its savepoint, and a failure rolls the transaction
// back (with what BatchStart wrote, whose after then does not run; the next
// batch's BatchStart does that work again). The transaction statements run
// on the connection itself (see stmtCache); BEGIN IMMEDIATE takes the write
// lock before the first read.
func (d *Driver) runBatch(t *wtx, connErr error, batch []*op) {
	start := time.Now()
	ctx := context.Background()
	stmts := t.stmts
	var after func()
	// cause is the first ErrUnavailable error an operation met: when the
	// batch then fails as a whole with a less telling error (SQLite may roll
	// the transaction back itself on SQLITE_FULL), the callers get the cause.
	var cause error
	hooks := d.hooks.Load()
	finish := func(err error) {
		err = d.classify(err)
		if err != nil && cause != nil && !errors.Is(err, tgdriver.ErrUnavailable) {
			err = fmt.Errorf("%w (then: %v)", cause, err)
		}
		// The hook runs before any caller is answered, so that a caller
		// that sees its write done also sees the batch counted.
		if hooks != nil && hooks.OnBatch != nil {
			hooks.OnBatch(len(batch), time.Since(start), err)
		}
		for _, o := range batch {
			if o.err == nil && err != nil {
				o.err = err
			}
			close(o.done)
		}
	}
	if connErr != nil {
		finish(fmt.Errorf("database connection: %w", connErr))
		return
	}
	// rollback ends the transaction after a failure. SQLite may already have
	// rolled it back, and then ROLLBACK fails harmlessly.
	rollback := func() {
		err := stmts.control(ctx, sqlRollback)
		if stmts.inTransaction() {
			d.log.Error("could not end a failed write transaction", "err", err)
		}
	}
	if stmts.inTransaction() {
		// Never expected: a transaction left open by a failure above. Its
		// writes were never acknowledged; drop them rather than commit them
		// with this batch.
		d.log.Error("the write connection was left inside a transaction; rolling it back")
		rollback()
	}
	// Never write through files that are no longer the database's.
	if err := d.checkFiles(); err != nil {
		finish(err)
		return
	}
	if err := stmts.control(ctx, sqlBegin); err != nil {
		finish(fmt.Errorf("begin write transaction: %w", err))
		return
	}
	if hooks != nil && hooks.BatchStart != nil {
		var err error
		if after, err = runBatchStart(d, t, hooks.BatchStart); err != nil {
			rollback()
			finish(d.classify(err))
			return
		}
	}
	live := 0 // operations whose context is still live: they run
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.err = err
		} else {
			live++
		}
	}
	if live == 1 {
		for _, o := range batch {
			if o.err != nil {
				continue
			}
			if o.err = o.ctx.Err(); o.err != nil {
				continue // ended while the batch began: skipped all the same
			}
			if o.err = d.classify(runGuarded(d, t, o.fn)); o.err != nil {
				rollback()
				finish(nil)
				return
			}
		}
	} else if live > 1 {
		for _, o := range batch {
			if o.err != nil {
				continue
			}
			if o.err = o.ctx.Err(); o.err != nil {
				continue // ended while earlier operations ran: skipped
			}
			if err := stmts.control(ctx, sqlSavepoint); err != nil {
				rollback()
				finish(fmt.Errorf("open savepoint: %w", err))
				return
			}
			o.err = d.classify(runGuarded(d, t, o.fn))
			if o.err != nil {
				if cause == nil && errors.Is(o.err, tgdriver.ErrUnavailable) {
					cause = o.err
				}
				// Undo this operation only; the others of the batch stand.
				if err := stmts.control(ctx, sqlRollbackTo); err != nil {
					rollback()
					finish(fmt.Errorf("roll back savepoint: %w", err))
					return
				}
			}
			if err := stmts.control(ctx, sqlRelease); err != nil {
				rollback()
				finish(fmt.Errorf("release savepoint: %w", err))
				return
			}
		}
	}
	if err := stmts.control(ctx, sqlCommit); err != nil {
		// A failed COMMIT may leave the transaction open (SQLITE_BUSY); end it
		// so that nothing of this batch commits later with another.
		rollback()
		err = d.classifyCommit(err)
		d.log.Error("commit failed; every operation of the batch failed", "ops", len(batch), "err", err)
		finish(fmt.Errorf("commit: %w", err))
		return
	}
	// A file removed or replaced while the batch ran means the commit went
	// to files that may no longer be the database's (another process may
	// checkpoint or reset the WAL through a new -shm): do not acknowledge it.
	if err := d.checkFiles(); err != nil {
		finish(fmt.Errorf("%w; this write reached the old files and may or may not have been kept: inspect before retrying against a restarted server", err))
		return
	}
	if after != nil {
		after()
	}
	if d.files.walBytes.Load() >= checkpointAt {
		d.ckpt.kicked()
	}
	finish(nil)
}

// runBatchStart runs the domain's BatchStart hook, turning a panic into an
// error.
func runBatchStart(d *Driver, t *wtx, fn func(context.Context, tgdriver.Tx) (func(), error)) (after func(), err error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("batch start hook panicked", "panic", r, "stack", string(debug.Stack()))
			after, err = nil, fmt.Errorf("%w: internal error in the batch start hook: %v", ErrInternal, r)
		}
	}()
	return fn(context.Background(), t)
}

// runGuarded runs fn and turns a panic into an error, so one bad operation
// cannot stop the writer.
func runGuarded(d *Driver, t *wtx, fn func(tgdriver.Tx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("write operation panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: internal error in write operation: %v", ErrInternal, r)
		}
	}()
	return fn(t)
}

// ErrInternal marks a fault of the driver or of the domain's code rather
// than of the input or the database's environment (a panic in a write).
var ErrInternal = errors.New("internal error")

// maxCachedStmts bounds stmtCache. The driver's write statements are a fixed
// set of well under a hundred, plus one UPDATE per shape of UpdateTask the
// domain uses; the bound only guards against a bug that builds SQL text from
// data.
const maxCachedStmts = 512

// stmtCache holds the writer connection's prepared statements by SQL text,
// so that each statement is compiled once per connection instead of on every
// call (compiling an UPDATE of tasks, with its indexes, foreign keys and
// checks, cost more than running it). Only the writer goroutine uses it. The
// statements run on the connection directly: the writer opens and ends the
// batch transaction and savepoints itself, with statements of this cache,
// because database/sql would compile a connection's statement again for
// every transaction (Tx.StmtContext). The transaction control is here,
// beside the batch loop that runs it; the lookups of the operations'
// statements (get, exec, and wtx's query helpers) are in update.go, beside
// Fetch and Apply, the hot lane's two rounds.
type stmtCache struct {
	conn *sql.Conn
	m    map[string]*sql.Stmt
}

func newStmtCache(conn *sql.Conn) *stmtCache {
	return &stmtCache{conn: conn, m: make(map[string]*sql.Stmt)}
}

// control runs one of the writer's transaction control statements (BEGIN,
// SAVEPOINT, RELEASE, ROLLBACK TO, COMMIT, ROLLBACK), prepared on first
// use and kept in the cache like every statement; the six never fill it.
func (c *stmtCache) control(ctx context.Context, query string) error {
	st := c.m[query]
	if st == nil {
		var err error
		if st, err = c.conn.PrepareContext(ctx, query); err != nil {
			return err
		}
		c.m[query] = st
	}
	_, err := st.ExecContext(ctx)
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
