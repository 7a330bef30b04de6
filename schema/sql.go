package schema

import (
	"context"
	"database/sql"
)

// SQLQueryer is a database/sql handle: a *sql.DB, *sql.Conn or *sql.Tx.
type SQLQueryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SQL adapts a database/sql handle to Conn.
func SQL(q SQLQueryer) Conn { return sqlConn{q} }

type sqlConn struct{ q SQLQueryer }

func (c sqlConn) Exec(ctx context.Context, query string, args ...any) error {
	_, err := c.q.ExecContext(ctx, query, args...)
	return err
}

func (c sqlConn) QueryRow(ctx context.Context, query string, args ...any) Row {
	return c.q.QueryRowContext(ctx, query, args...)
}
