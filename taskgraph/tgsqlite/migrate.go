package tgsqlite

import (
	"context"
	"database/sql"
	"embed"
	"io/fs"
	"sync"

	"github.com/graph-engineering/graph-engineering-mcp/schema"
)

// migrationFiles is the driver's own migration series, applied by package
// schema's runner in the SQLite dialect below.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// dialect is SQLite's SQL for the runner's bookkeeping.
var dialect = schema.Dialect{
	CountTables: `SELECT COUNT(*) FILTER (WHERE name = 'schema_version'),
		COUNT(*) FILTER (WHERE name <> 'schema_version' AND name NOT LIKE 'sqlite\_%' ESCAPE '\')
		FROM sqlite_schema`,
	CreateVersionTable: `CREATE TABLE IF NOT EXISTS schema_version (
		singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
		version INTEGER NOT NULL,
		applied_at_ms INTEGER NOT NULL
	)`,
	RecordVersion: `INSERT INTO schema_version (singleton, version, applied_at_ms)
		VALUES (1, ?, CAST(unixepoch('subsec') * 1000 AS INTEGER))
		ON CONFLICT (singleton) DO UPDATE SET version = excluded.version, applied_at_ms = excluded.applied_at_ms`,
}

var loadSchema = sync.OnceValues(func() (schema.Series, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return schema.Series{}, err
	}
	return schema.Load(sub, dialect)
})

// Schema returns the SQLite migration series (migrations/*.sql) in the
// SQLite dialect. Its error, a malformed series, is a build defect that
// this package's tests catch.
func Schema() (schema.Series, error) { return loadSchema() }

// inspectSchema, requireLatest and apply run the series on a database/sql handle.
func inspectSchema(ctx context.Context, q schema.SQLQueryer) (int, error) {
	s, err := Schema()
	if err != nil {
		return 0, err
	}
	return s.Inspect(ctx, schema.SQL(q))
}

func requireLatest(ctx context.Context, q schema.SQLQueryer) (int, error) {
	s, err := Schema()
	if err != nil {
		return 0, err
	}
	return s.RequireLatest(ctx, schema.SQL(q))
}

func apply(ctx context.Context, tx *sql.Tx) (from, to int, err error) {
	s, err := Schema()
	if err != nil {
		return 0, 0, err
	}
	return s.Apply(ctx, schema.SQL(tx))
}
