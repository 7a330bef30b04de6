package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var files embed.FS

// ErrTooNew matches the error returned when the database was written by a
// newer schema than this binary knows.
var ErrTooNew = errors.New("database schema is newer than this binary")

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in version order. It fails if
// the numbering has a gap or a duplicate.
func Migrations() ([]Migration, error) {
	return migrationsFrom(files)
}

// migrationsFrom reads the migrations under migrations/ in fsys.
func migrationsFrom(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must be NNNN_description.sql", name)
		}
		body, err := fs.ReadFile(fsys, path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %q: expected version %d (versions must start at 1 without gaps or duplicates)", m.Name, i+1)
		}
	}
	return ms, nil
}

// Latest returns the newest version this binary knows.
func Latest() int {
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// Apply brings the database behind tx up to the newest embedded version. The
// caller owns tx (it should be a write transaction that took the write lock
// first, e.g. BEGIN IMMEDIATE) and commits it; Apply returns the version the
// database had before and the version it has now. A database newer than the
// binary gets an error matching ErrTooNew and no write.
func Apply(ctx context.Context, tx *sql.Tx) (from, to int, err error) {
	ms, err := Migrations()
	if err != nil {
		return 0, 0, err
	}
	return apply(ctx, tx, ms)
}

// apply is Apply with the migrations given, in version order from 1.
func apply(ctx context.Context, tx *sql.Tx, ms []Migration) (from, to int, err error) {
	if len(ms) == 0 {
		return 0, 0, errors.New("no migrations to apply")
	}
	latest := ms[len(ms)-1].Version
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
		version INTEGER NOT NULL,
		applied_at_ms INTEGER NOT NULL
	)`); err != nil {
		return 0, 0, fmt.Errorf("create schema_version table: %w", err)
	}
	var current int
	switch err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version WHERE singleton = 1`).Scan(&current); {
	case errors.Is(err, sql.ErrNoRows):
		current = 0
	case err != nil:
		return 0, 0, fmt.Errorf("read schema version: %w", err)
	}
	if current > latest {
		return current, current, fmt.Errorf("%w: the database is at version %d, this binary knows versions up to %d; upgrade graph-engineering-mcp (the database was left untouched)", ErrTooNew, current, latest)
	}
	for _, m := range ms[current:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return current, current, fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
	}
	if current < latest {
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (singleton, version, applied_at_ms)
			VALUES (1, ?, CAST(unixepoch('subsec') * 1000 AS INTEGER))
			ON CONFLICT (singleton) DO UPDATE SET version = excluded.version, applied_at_ms = excluded.applied_at_ms`, latest); err != nil {
			return current, current, fmt.Errorf("record schema version %d: %w", latest, err)
		}
	}
	return current, latest, nil
}
