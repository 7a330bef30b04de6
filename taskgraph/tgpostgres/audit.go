package tgpostgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// AuditHead returns the audit chain's entry count and head hash.
func (r reads) AuditHead(ctx context.Context) (int64, string, bool, error) {
	var n int64
	var head string
	switch err := r.q.QueryRow(ctx, `SELECT entry_count, head_hash FROM audit_head WHERE singleton = 1`).Scan(&n, &head); {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, "", false, nil
	case err != nil:
		return 0, "", false, r.fail(ctx, "read the audit head", err)
	}
	return n, head, n > 0, nil
}

// AuditEntries calls fn with each audit chain entry in order.
func (r reads) AuditEntries(ctx context.Context, fn func(tgdriver.AuditRow) error) error {
	rows, err := r.q.Query(ctx, `SELECT seq, kind, workflow_id, at_ms, detail, prev_hash, hash FROM audit_chain ORDER BY seq`)
	if err != nil {
		return r.fail(ctx, "read the audit chain", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a tgdriver.AuditRow
		if err := rows.Scan(&a.Seq, &a.Kind, &a.WorkflowID, &a.AtMS, &a.Detail, &a.PrevHash, &a.Hash); err != nil {
			return r.fail(ctx, "read the audit chain", err)
		}
		if err := fn(a); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return r.fail(ctx, "read the audit chain", err)
	}
	return nil
}

// EventCount counts the events of every workflow, by their heads.
func (r reads) EventCount(ctx context.Context) (int64, error) {
	var n int64
	if err := r.q.QueryRow(ctx, `SELECT COALESCE(SUM(event_count), 0)::BIGINT FROM workflows`).Scan(&n); err != nil {
		return 0, r.fail(ctx, "count events", err)
	}
	return n, nil
}

// LockAuditHead creates the audit head when missing (a concurrent creator
// wins and this insert does nothing once it committed), then locks it.
func (w *wtx) LockAuditHead(ctx context.Context) (int64, string, error) {
	if _, err := w.c.Exec(ctx, `INSERT INTO audit_head (singleton, entry_count, head_hash) VALUES (1, 0, '')
		ON CONFLICT (singleton) DO NOTHING`); err != nil {
		return 0, "", w.fail(ctx, "create the audit head", err)
	}
	var n int64
	var head string
	if err := w.c.QueryRow(ctx, `SELECT entry_count, head_hash FROM audit_head WHERE singleton = 1 FOR UPDATE`).Scan(&n, &head); err != nil {
		return 0, "", w.fail(ctx, "lock the audit head", err)
	}
	return n, head, nil
}

// AppendAudit advances the audit head by compare and set, then inserts a.
func (w *wtx) AppendAudit(ctx context.Context, a tgdriver.AuditRow) error {
	tag, err := w.c.Exec(ctx, `UPDATE audit_head SET entry_count = $1, head_hash = $2
		WHERE singleton = 1 AND entry_count = $3 AND head_hash = $4`, a.Seq, a.Hash, a.Seq-1, a.PrevHash)
	if err != nil {
		return w.fail(ctx, "advance the audit head", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("audit entry %d: %w", a.Seq, tgdriver.ErrChainMoved)
	}
	if _, err := w.c.Exec(ctx, `INSERT INTO audit_chain (seq, kind, workflow_id, at_ms, detail, prev_hash, hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, a.Seq, a.Kind, a.WorkflowID, a.AtMS, a.Detail, a.PrevHash, a.Hash); err != nil {
		return w.fail(ctx, "append audit entry", err)
	}
	return nil
}
