package taskgraph

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
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

// wtx is what an operation sees: the batch transaction and server time.
type wtx struct {
	ctx   context.Context
	tx    *sql.Tx
	now   time.Time
	nowMS int64
	s     *Store
	// hooks run after the batch commits, in order, only if this operation's
	// savepoint was released and the commit succeeded.
	hooks []func()
	wake  bool
}

// afterCommit registers fn to run once the batch holding this operation has
// committed. fn must not block.
func (w *wtx) afterCommit(fn func()) { w.hooks = append(w.hooks, fn) }

// wakeWaiters marks that this operation may have made a task claimable.
func (w *wtx) wakeWaiters() { w.wake = true }

func (w *wtx) exec(query string, args ...any) (sql.Result, error) {
	return w.tx.ExecContext(w.ctx, query, args...)
}

func (w *wtx) queryRow(query string, args ...any) *sql.Row {
	return w.tx.QueryRowContext(w.ctx, query, args...)
}

func (w *wtx) query(query string, args ...any) (*sql.Rows, error) {
	return w.tx.QueryContext(w.ctx, query, args...)
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
	if conn != nil {
		defer conn.Close()
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
						s.runOne(ctx, conn, connErr, o)
					default:
						return
					}
				}
			}
		}
		if first.raw != nil {
			s.runOne(ctx, conn, connErr, first)
			continue
		}
		batch = append(batch[:0], first)
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
		s.runBatch(ctx, conn, connErr, batch)
	}
}

func (s *Store) runOne(ctx context.Context, conn *sql.Conn, connErr error, o *op) {
	if o.raw == nil {
		s.runBatch(ctx, conn, connErr, []*op{o})
		return
	}
	switch {
	case connErr != nil:
		o.err = fmt.Errorf("database connection: %w", connErr)
	case o.ctx.Err() != nil:
		o.err = o.ctx.Err()
	default:
		o.err = o.raw(conn)
	}
	close(o.done)
}

func (s *Store) runBatch(ctx context.Context, conn *sql.Conn, connErr error, batch []*op) {
	start := time.Now()
	var hooks []func()
	wake := false
	finish := func(err error) {
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
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		finish(fmt.Errorf("begin write transaction: %w", err))
		return
	}
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.err = err
			continue
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT op`); err != nil {
			tx.Rollback()
			finish(fmt.Errorf("open savepoint: %w", err))
			return
		}
		now := s.clock.Now().UTC()
		w := &wtx{ctx: ctx, tx: tx, now: now, nowMS: now.UnixMilli(), s: s}
		o.err = runGuarded(w, o.fn)
		if o.err != nil {
			// Undo this operation only; the others of the batch stand.
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO op`); err != nil {
				tx.Rollback()
				finish(fmt.Errorf("roll back savepoint: %w", err))
				return
			}
		} else {
			hooks = append(hooks, w.hooks...)
			wake = wake || w.wake
		}
		if _, err := tx.ExecContext(ctx, `RELEASE op`); err != nil {
			tx.Rollback()
			finish(fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		tx.Rollback()
		s.log.Error("commit failed; every operation of the batch failed", "ops", len(batch), "err", err)
		finish(fmt.Errorf("commit: %w", err))
		return
	}
	for _, h := range hooks {
		h()
	}
	if wake {
		s.notify.broadcast()
	}
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
