package tgpostgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// txConn runs a write transaction on one pooled connection and begins it
// lazily: BEGIN travels with the transaction's first statements (a
// pipelined batch sends it in the same round trip), so a transaction costs
// no round trip of its own to begin.
type txConn struct {
	conn  *pgx.Conn
	begun bool
	// generic: the transaction plans prepared statements generically
	// (SendRound).
	generic bool
}

// beginSQL begins a write transaction (READ COMMITTED, see doc.go).
const beginSQL = `BEGIN ISOLATION LEVEL READ COMMITTED`

func (c *txConn) begin(ctx context.Context) error {
	if c.begun {
		return nil
	}
	if _, err := c.conn.Exec(ctx, beginSQL); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	c.begun = true
	return nil
}

// Exec runs a statement in the transaction.
func (c *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if !c.begun {
		b := &pgx.Batch{}
		b.Queue(sql, args...)
		br := c.SendBatch(ctx, b)
		tag, err := br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return tag, err
	}
	return c.conn.Exec(ctx, sql, args...)
}

// Query runs a query in the transaction.
func (c *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := c.begin(ctx); err != nil {
		return nil, err
	}
	return c.conn.Query(ctx, sql, args...)
}

// QueryRow runs a query of one row in the transaction.
func (c *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := c.begin(ctx); err != nil {
		return errRow{err}
	}
	return c.conn.QueryRow(ctx, sql, args...)
}

// SendBatch sends b's statements in one round trip, BEGIN first when the
// transaction has not begun.
func (c *txConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if c.begun {
		return c.conn.SendBatch(ctx, b)
	}
	nb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	nb.Queue(beginSQL)
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := c.conn.SendBatch(ctx, nb)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return errBatch{fmt.Errorf("begin: %w", err)}
	}
	c.begun = true
	return br
}

// genericPlansSQL makes the rest of the transaction run every prepared
// statement on its generic plan (see SendRound).
const genericPlansSQL = `SET LOCAL plan_cache_mode = force_generic_plan`

// SendRound sends a round of the hot path (Fetch, Apply) like SendBatch,
// and first, once per transaction, genericPlansSQL. The rounds' update
// shapes take arrays, and PostgreSQL's choice between a custom and the
// generic plan (plan_cache_mode auto) compares the generic plan's cost,
// which assumes ten elements, with the custom plans' of a batch's few:
// the generic plan never won, so every execution was planned again, some
// 12% of the server's CPU in a profile at W=8 (see doc.go, "Server CPU").
// The generic plans are the custom ones: a nested loop over the arrays,
// each element an index probe by seq or task id. The claim scans already
// ran on their generic plans. SET LOCAL ends with the transaction.
func (c *txConn) SendRound(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if c.generic {
		return c.SendBatch(ctx, b)
	}
	nb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	nb.Queue(genericPlansSQL)
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := c.SendBatch(ctx, nb)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return errBatch{fmt.Errorf("plan generically: %w", err)}
	}
	c.generic = true
	return br
}

// commit commits the transaction, if it began. A transaction that an error
// aborted answers COMMIT with ROLLBACK: that is an error too.
func (c *txConn) commit(ctx context.Context) error {
	if !c.begun {
		return nil
	}
	c.begun, c.generic = false, false
	tag, err := c.conn.Exec(ctx, "COMMIT")
	if err != nil {
		return err
	}
	if tag.String() != "COMMIT" {
		return errCommitRolledBack
	}
	return nil
}

// ended records that the transaction ended in a round of its own (Apply
// with Commit): commit and rollback then do nothing.
func (c *txConn) ended() { c.begun, c.generic = false, false }

// rollback ends the transaction, if it began, undoing it.
func (c *txConn) rollback(ctx context.Context) {
	if !c.begun {
		return
	}
	c.begun, c.generic = false, false
	// A connection whose ROLLBACK failed is left in a transaction, and the
	// pool closes such a connection when it is released.
	_, _ = c.conn.Exec(ctx, "ROLLBACK")
}

// errCommitRolledBack: COMMIT was answered with ROLLBACK, because a
// statement of the transaction had failed: nothing was committed (pgx's own
// error for it, which classifyCommit knows).
var errCommitRolledBack = pgx.ErrTxCommitRollback

// errRow is a pgx.Row that fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// errBatch is a pgx.BatchResults whose every result fails with err.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }

func (b errBatch) Tx() pgx.Tx { return nil }
