package tgpostgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/schema"
)

// migrationLockKey is the pg_advisory_xact_lock key under which replicas
// migrate: the first to start migrates, the others wait and find it done.
const migrationLockKey int64 = 0x6772617068656e67 // "grapheng"

// migrate brings the database to the newest PostgreSQL schema in one
// transaction under the advisory lock, refusing a newer schema
// (schema.ErrTooNew) and another program's database (schema.ErrForeign)
// without writing to them.
func (d *Driver) migrate(ctx context.Context) error {
	ms, err := schema.PostgresMigrations()
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return errors.New("migrate: the binary carries no PostgreSQL migrations")
	}
	latest := ms[len(ms)-1].Version
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
	current, err := d.inspect(ctx, tx, latest)
	if err != nil {
		return err
	}
	for _, m := range ms[current:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate %s: apply migration %s: %w", d.location, m.Name, d.classify(ctx, err))
		}
	}
	if current < latest {
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version (singleton, version, applied_at_ms)
			VALUES (1, $1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)
			ON CONFLICT (singleton) DO UPDATE SET version = excluded.version, applied_at_ms = excluded.applied_at_ms`, latest); err != nil {
			return fmt.Errorf("migrate %s: record schema version %d: %w", d.location, latest, d.classify(ctx, err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", d.location, d.classify(ctx, err))
	}
	if current < latest {
		d.log.Info("database migrated", "from", current, "to", latest)
	}
	return nil
}

// requireLatest refuses, without writing, a database whose schema is not
// exactly this binary's newest (a read-only opener may not migrate it).
func (d *Driver) requireLatest(ctx context.Context) error {
	ms, err := schema.PostgresMigrations()
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("open %s: %w", d.location, d.classify(ctx, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	current, err := d.inspect(ctx, tx, latest)
	if err != nil {
		return err
	}
	if current < latest {
		return fmt.Errorf("%w: %s is at version %d and this binary reads version %d; start graph-engineering-mcp serve on it once, which migrates it (the database was left untouched)", schema.ErrTooOld, d.location, current, latest)
	}
	return nil
}

// inspect returns the schema version of the database's current schema: 0
// when it holds no tables.
func (d *Driver) inspect(ctx context.Context, tx pgx.Tx, latest int) (int, error) {
	var tracked, others int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FILTER (WHERE table_name = 'schema_version'),
		COUNT(*) FILTER (WHERE table_name <> 'schema_version')
		FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&tracked, &others); err != nil {
		return 0, fmt.Errorf("migrate %s: read the schema: %w", d.location, d.classify(ctx, err))
	}
	if tracked == 0 {
		if others > 0 {
			return 0, fmt.Errorf("%w: %s holds %d tables or views in its schema but no schema_version table, so it is not a graph-engineering database (it was left untouched); give an empty database or one this program created", schema.ErrForeign, d.location, others)
		}
		return 0, nil
	}
	var current int
	switch err := tx.QueryRow(ctx, `SELECT version FROM schema_version WHERE singleton = 1`).Scan(&current); {
	case errors.Is(err, pgx.ErrNoRows):
		current = 0
	case err != nil:
		return 0, fmt.Errorf("migrate %s: read the schema version: %w", d.location, d.classify(ctx, err))
	}
	if current > latest {
		return current, fmt.Errorf("%w: %s is at version %d, this binary knows versions up to %d; upgrade graph-engineering-mcp (the database was left untouched)", schema.ErrTooNew, d.location, current, latest)
	}
	return current, nil
}
