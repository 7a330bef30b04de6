package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// The database-wide audit chain (migration 0003).
const (
	sqlAuditHead     = `SELECT entry_count, head_hash FROM audit_head WHERE singleton = 1`
	sqlAuditEntries  = `SELECT seq, kind, workflow_id, at_ms, detail, prev_hash, hash FROM audit_chain ORDER BY seq`
	sqlEventCount    = `SELECT COALESCE(SUM(event_count), 0) FROM workflows`
	sqlInsertAudit   = `INSERT INTO audit_chain (seq, kind, workflow_id, at_ms, detail, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)`
	sqlAdvanceAudit  = `UPDATE audit_head SET entry_count = ?, head_hash = ? WHERE singleton = 1 AND entry_count = ? AND head_hash = ?`
	sqlEnsureAuditHd = `INSERT INTO audit_head (singleton, entry_count, head_hash) VALUES (1, 0, '') ON CONFLICT (singleton) DO NOTHING`
)

// hashVersion is e's hash version, 1 when unset.
func hashVersion(e tgdriver.EventRow) int {
	if e.HashVersion == 0 {
		return 1
	}
	return e.HashVersion
}

// AuditHead returns the audit chain's entry count and head hash.
func (r *reads) AuditHead(ctx context.Context) (int64, string, bool, error) {
	var n int64
	var head string
	switch err := r.q.queryRow(ctx, sqlAuditHead).Scan(&n, &head); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, "", false, nil
	case err != nil:
		return 0, "", false, fmt.Errorf("read the audit head: %w", err)
	}
	return n, head, n > 0, nil
}

// AuditEntries calls fn with each audit chain entry in order.
func (r *reads) AuditEntries(ctx context.Context, fn func(tgdriver.AuditRow) error) error {
	rows, err := r.q.query(ctx, sqlAuditEntries)
	if err != nil {
		return fmt.Errorf("read the audit chain: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a tgdriver.AuditRow
		if err := rows.Scan(&a.Seq, &a.Kind, &a.WorkflowID, &a.AtMS, &a.Detail, &a.PrevHash, &a.Hash); err != nil {
			return err
		}
		if err := fn(a); err != nil {
			return err
		}
	}
	return rows.Err()
}

// EventCount counts the events of every workflow, by their heads.
func (r *reads) EventCount(ctx context.Context) (int64, error) {
	var n int64
	if err := r.q.queryRow(ctx, sqlEventCount).Scan(&n); err != nil {
		return 0, fmt.Errorf("count events: %w", err)
	}
	return n, nil
}

// LockAuditHead returns the audit head, creating it empty when missing. The
// single writer serialises every write transaction, so nothing is locked.
func (t *wtx) LockAuditHead(context.Context) (int64, string, error) {
	if _, err := t.exec(sqlEnsureAuditHd); err != nil {
		return 0, "", fmt.Errorf("create the audit head: %w", err)
	}
	var n int64
	var head string
	if err := t.queryRow(bg, sqlAuditHead).Scan(&n, &head); err != nil {
		return 0, "", fmt.Errorf("read the audit head: %w", err)
	}
	return n, head, nil
}

// AppendAudit inserts a and advances the audit head by compare and set.
func (t *wtx) AppendAudit(_ context.Context, a tgdriver.AuditRow) error {
	res, err := t.exec(sqlAdvanceAudit, a.Seq, a.Hash, a.Seq-1, a.PrevHash)
	if err != nil {
		return fmt.Errorf("advance the audit head: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w: audit entry %d links to head %q at %d entries (rows %d, %v)", tgdriver.ErrChainMoved, a.Seq, a.PrevHash, a.Seq-1, n, err)
	}
	if _, err := t.exec(sqlInsertAudit, a.Seq, a.Kind, a.WorkflowID, a.AtMS, a.Detail, a.PrevHash, a.Hash); err != nil {
		return fmt.Errorf("append audit entry %d: %w", a.Seq, err)
	}
	return nil
}
