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

//go:embed migrations/sqlite/*.sql
var sqliteFiles embed.FS

//go:embed migrations/postgres/*.sql
var postgresFiles embed.FS

// files is the SQLite series, rooted so that its migrations are under
// migrations/.
var files = mustSub(sqliteFiles, "migrations/sqlite")

func mustSub(fsys embed.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return rootAs{sub}
}

// rootAs presents fsys as the folder migrations/ of a file system, the
// layout migrationsFrom reads.
type rootAs struct{ fs.FS }

func (r rootAs) Open(name string) (fs.File, error) {
	if name == "migrations" {
		return r.FS.Open(".")
	}
	if rest, ok := strings.CutPrefix(name, "migrations/"); ok {
		return r.FS.Open(rest)
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// PostgresMigrations returns the PostgreSQL series (migrations/postgres) in
// version order; the tgpostgres driver applies it. The SQLite series
// (migrations/sqlite) is Migrations.
func PostgresMigrations() ([]Migration, error) {
	return migrationsFrom(mustSub(postgresFiles, "migrations/postgres"))
}

// ErrTooNew matches the error returned when the database was written by a
// newer schema than this binary knows.
var ErrTooNew = errors.New("database schema is newer than this binary")

// ErrForeign matches the error returned for a database that holds tables but
// no schema_version table: another program's database, which the store must
// not add its tables to.
var ErrForeign = errors.New("database belongs to another program")

// Queryer is what Inspect reads through: a *sql.DB, *sql.Conn or *sql.Tx.
type Queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Inspect reads the schema version of the database behind q without writing
// to it: 0 for an empty database, which Apply will initialise. A version
// newer than Latest is an error matching ErrTooNew; a database with tables
// but no schema_version table is an error matching ErrForeign. Callers use it
// to refuse such a database before doing anything that writes to the file.
func Inspect(ctx context.Context, q Queryer) (int, error) {
	return inspect(ctx, q, Latest())
}

func inspect(ctx context.Context, q Queryer, latest int) (int, error) {
	var tracked, others int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FILTER (WHERE name = 'schema_version'),
		COUNT(*) FILTER (WHERE name <> 'schema_version' AND name NOT LIKE 'sqlite\_%' ESCAPE '\')
		FROM sqlite_schema`).Scan(&tracked, &others); err != nil {
		return 0, fmt.Errorf("read the schema: %w", err)
	}
	if tracked == 0 {
		if others > 0 {
			return 0, fmt.Errorf("%w: it holds %d tables, indexes or views but no schema_version table, so it is not a graph-engineering database (it was left untouched)", ErrForeign, others)
		}
		return 0, nil
	}
	var current int
	switch err := q.QueryRowContext(ctx, `SELECT version FROM schema_version WHERE singleton = 1`).Scan(&current); {
	case errors.Is(err, sql.ErrNoRows):
		current = 0
	case err != nil:
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if current > latest {
		return current, fmt.Errorf("%w: the database is at version %d, this binary knows versions up to %d; upgrade graph-engineering-mcp (the database was left untouched)", ErrTooNew, current, latest)
	}
	return current, nil
}

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
	current, err := inspect(ctx, tx, latest)
	if err != nil {
		return current, current, err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
		version INTEGER NOT NULL,
		applied_at_ms INTEGER NOT NULL
	)`); err != nil {
		return current, current, fmt.Errorf("create schema_version table: %w", err)
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
