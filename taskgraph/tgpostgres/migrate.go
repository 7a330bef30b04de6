package tgpostgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/schema"
)

// migrationFiles is the driver's own migration series, applied by package
// schema's runner in the PostgreSQL dialect below.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// dialect is PostgreSQL's SQL for the runner's bookkeeping.
var dialect = schema.Dialect{
	CountTables: `SELECT COUNT(*) FILTER (WHERE table_name = 'schema_version'),
		COUNT(*) FILTER (WHERE table_name <> 'schema_version')
		FROM information_schema.tables WHERE table_schema = current_schema()`,
	CreateVersionTable: `CREATE TABLE IF NOT EXISTS schema_version (
		singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
		version INTEGER NOT NULL,
		applied_at_ms BIGINT NOT NULL
	)`,
	RecordVersion: `INSERT INTO schema_version (singleton, version, applied_at_ms)
		VALUES (1, $1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)
		ON CONFLICT (singleton) DO UPDATE SET version = excluded.version, applied_at_ms = excluded.applied_at_ms`,
}

var loadSchema = sync.OnceValues(func() (schema.Series, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return schema.Series{}, err
	}
	return schema.Load(sub, dialect)
})

// Schema returns the PostgreSQL migration series (migrations/*.sql) in the
// PostgreSQL dialect. Its error, a malformed series, is a build defect that
// this package's tests catch.
func Schema() (schema.Series, error) { return loadSchema() }

// pgConn adapts a pgx transaction to the runner's schema.Conn.
type pgConn struct{ tx pgx.Tx }

func (c pgConn) Exec(ctx context.Context, query string, args ...any) error {
	_, err := c.tx.Exec(ctx, query, args...)
	return err
}

func (c pgConn) QueryRow(ctx context.Context, query string, args ...any) schema.Row {
	return c.tx.QueryRow(ctx, query, args...)
}

// migrationLockKey is the pg_advisory_xact_lock key under which replicas
// migrate: the first to start migrates, the others wait and find it done.
const migrationLockKey int64 = 0x6772617068656e67 // "grapheng"

// migrate brings the database to the newest PostgreSQL schema in one
// transaction under the advisory lock, refusing a newer schema
// (schema.ErrTooNew) and another program's database (schema.ErrForeign)
// without writing to them.
func (d *Driver) migrate(ctx context.Context) error {
	s, err := Schema()
	if err != nil {
		return err
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("open %s: %w", d.location, d.classify(ctx, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Another replica may hold the lock while it migrates a large database,
	// and a migration's statements may run long: neither is bounded here.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = 0`); err != nil {
		return fmt.Errorf("migrate %s: %w", d.location, d.classify(ctx, err))
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
		return fmt.Errorf("migrate %s: take the migration lock: %w", d.location, d.classify(ctx, err))
	}
	from, to, err := s.Apply(ctx, pgConn{tx})
	if err != nil {
		return fmt.Errorf("migrate %s: %w", d.location, d.classify(ctx, err))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", d.location, d.classify(ctx, err))
	}
	if from != to {
		d.log.Info("database migrated", "from", from, "to", to)
	}
	return nil
}

// requireLatest refuses, without writing, a database whose schema is not
// exactly this binary's newest (a read-only opener may not migrate it).
func (d *Driver) requireLatest(ctx context.Context) error {
	s, err := Schema()
	if err != nil {
		return err
	}
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("open %s: %w", d.location, d.classify(ctx, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := s.RequireLatest(ctx, pgConn{tx}); err != nil {
		return fmt.Errorf("open %s: %w", d.location, d.classify(ctx, err))
	}
	return nil
}
