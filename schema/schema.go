package schema

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// ErrTooNew matches the error returned when the database was written by a
// newer schema than this binary knows.
var ErrTooNew = errors.New("database schema is newer than this binary")

// ErrForeign matches the error returned for a database that holds tables but
// no schema_version table: another program's database, which the store must
// not add its tables to.
var ErrForeign = errors.New("database belongs to another program")

// ErrTooOld matches the error RequireLatest returns for a database whose
// schema is older than this binary's (including one never initialised): a
// reader that must not write cannot migrate it.
var ErrTooOld = errors.New("database schema is older than this binary")

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Conn is what the runner reads and writes through: a driver's transaction
// or connection, adapted (SQL adapts database/sql's).
type Conn interface {
	Exec(ctx context.Context, query string, args ...any) error
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Row is one result row of Conn.QueryRow.
type Row interface {
	Scan(dest ...any) error
}

// Dialect is the SQL in which databases differ, for the runner's own
// bookkeeping: each driver gives its own, with its migrations.
type Dialect struct {
	// CountTables answers one row of two counts in the database's current
	// schema: of tables named schema_version (0 or 1), and of the other
	// tables, indexes or views (the database's own catalogue excluded).
	CountTables string
	// CreateVersionTable creates the schema_version table if it is missing:
	// singleton (1), version, applied_at_ms.
	CreateVersionTable string
	// RecordVersion sets the one row of schema_version to its one
	// parameter, the version, and applied_at_ms to the database's time.
	RecordVersion string
}

// Series is a driver's numbered migrations with its dialect: what Apply,
// Inspect and RequireLatest run.
type Series struct {
	Dialect    Dialect
	Migrations []Migration // in version order from 1, without gaps
}

// Load reads the migrations named NNNN_description.sql at the root of fsys
// (a driver's embedded folder) into a Series of dialect d. It fails if the
// numbering has a gap or a duplicate, or there is no migration at all.
func Load(fsys fs.FS, d Dialect) (Series, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return Series{}, fmt.Errorf("read embedded migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return Series{}, fmt.Errorf("migration %q: name must be NNNN_description.sql", name)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return Series{}, fmt.Errorf("read migration %q: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return Series{}, fmt.Errorf("migration %q: expected version %d (versions must start at 1 without gaps or duplicates)", m.Name, i+1)
		}
	}
	if len(ms) == 0 {
		return Series{}, errors.New("no migrations embedded")
	}
	return Series{Dialect: d, Migrations: ms}, nil
}

// Latest returns the newest version of the series.
func (s Series) Latest() int {
	if len(s.Migrations) == 0 {
		return 0
	}
	return s.Migrations[len(s.Migrations)-1].Version
}

// Inspect reads the schema version of the database behind c without
// writing to it: 0 for an empty database, which Apply will initialise. A
// version newer than Latest is an error matching ErrTooNew; a database with
// tables but no schema_version table is an error matching ErrForeign.
// Callers use it to refuse such a database before doing anything that
// writes to it.
func (s Series) Inspect(ctx context.Context, c Conn) (int, error) {
	latest := s.Latest()
	var tracked, others int
	if err := c.QueryRow(ctx, s.Dialect.CountTables).Scan(&tracked, &others); err != nil {
		return 0, fmt.Errorf("read the schema: %w", err)
	}
	if tracked == 0 {
		if others > 0 {
			return 0, fmt.Errorf("%w: it holds %d tables, indexes or views but no schema_version table, so it is not a graph-engineering database (it was left untouched); give an empty database or one this program created", ErrForeign, others)
		}
		return 0, nil
	}
	var rows, current int
	if err := c.QueryRow(ctx, `SELECT COUNT(*), COALESCE(MAX(version), 0) FROM schema_version WHERE singleton = 1`).Scan(&rows, &current); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if current > latest {
		return current, fmt.Errorf("%w: the database is at version %d, this binary knows versions up to %d; upgrade graph-engineering-mcp (the database was left untouched)", ErrTooNew, current, latest)
	}
	return current, nil
}

// RequireLatest reads the schema version of the database behind c without
// writing to it and returns it if it is exactly Latest. An older version is
// an error matching ErrTooOld; a newer one matches ErrTooNew; another
// program's database matches ErrForeign. Read-only openers use it: they may
// neither migrate a database nor read one whose tables they do not know.
func (s Series) RequireLatest(ctx context.Context, c Conn) (int, error) {
	v, err := s.Inspect(ctx, c)
	if err != nil {
		return v, err
	}
	if latest := s.Latest(); v < latest {
		return v, fmt.Errorf("%w: the database is at version %d and this binary reads version %d; open it once read-write with this binary (start graph-engineering-mcp serve on it, which migrates it), or use the binary that wrote it (the database was left untouched)", ErrTooOld, v, latest)
	}
	return v, nil
}

// Apply brings the database behind c up to Latest. The caller owns c: a
// write transaction that holds the database's migration lock already
// (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock), which it commits.
// Apply returns the version the database had before and the version it has
// now. A database newer than the series, or another program's, gets an
// error matching ErrTooNew or ErrForeign and no write.
func (s Series) Apply(ctx context.Context, c Conn) (from, to int, err error) {
	if len(s.Migrations) == 0 {
		return 0, 0, errors.New("no migrations to apply")
	}
	latest := s.Latest()
	current, err := s.Inspect(ctx, c)
	if err != nil {
		return current, current, err
	}
	if current == latest {
		return current, latest, nil
	}
	if err := c.Exec(ctx, s.Dialect.CreateVersionTable); err != nil {
		return current, current, fmt.Errorf("create schema_version table: %w", err)
	}
	for _, m := range s.Migrations[current:] {
		if err := c.Exec(ctx, m.SQL); err != nil {
			return current, current, fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
	}
	if err := c.Exec(ctx, s.Dialect.RecordVersion, latest); err != nil {
		return current, current, fmt.Errorf("record schema version %d: %w", latest, err)
	}
	return current, latest, nil
}
