package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// This file opens a store on either driver: a file path is SQLite (tgsqlite
// under taskgraph.OpenDriver, by sqlitestore), a postgres:// or
// postgresql:// URL is PostgreSQL (tgpostgres under taskgraph.OpenDriver).
// The CLI is the composition root: the domain (taskgraph) knows no driver,
// and what only SQLite has (db check, db backup, db checkpoint) is called
// here on the SQLite driver.

// openMode says what a command does with the store it opens.
type openMode int

const (
	// openServe: the server's store (creates and migrates the database).
	openServe openMode = iota
	// openOperator: an operator command that writes.
	openOperator
	// openReadOnly: a command that only reads; every write is refused.
	openReadOnly
)

// Pool bounds for PostgreSQL, flags of serve and bench.
const (
	defaultPGMaxConns = 20
	pgMaxConnsEnv     = "GRAPH_ENGINEERING_PG_MAX_CONNS"
	pgMinConnsEnv     = "GRAPH_ENGINEERING_PG_MIN_CONNS"
)

// pgPoolFlags are serve's and bench's PostgreSQL pool bounds.
func pgPoolFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "pg-max-conns", Value: defaultPGMaxConns, EnvVars: []string{pgMaxConnsEnv},
			Usage: "PostgreSQL: at most `N` pooled connections per replica (a write waits for one up to the busy timeout)"},
		&cli.IntFlag{Name: "pg-min-conns", Value: 0, EnvVars: []string{pgMinConnsEnv},
			Usage: "PostgreSQL: keep at least `N` pooled connections open"},
	}
}

// pgPool reads the pool flags of c (operator commands have none: a small
// pool).
func pgPool(c *cli.Context) (maxConns, minConns int, err error) {
	maxConns, minConns = 2, 0
	for _, anc := range c.Lineage() {
		if anc.Command != nil && hasFlag(anc.Command.Flags, "pg-max-conns") {
			maxConns, minConns = anc.Int("pg-max-conns"), anc.Int("pg-min-conns")
			break
		}
	}
	if maxConns < 1 || maxConns > 1000 {
		return 0, 0, usagef("--pg-max-conns must be between 1 and 1000 (got %d)", maxConns)
	}
	if minConns < 0 || minConns > maxConns {
		return 0, 0, usagef("--pg-min-conns must be between 0 and --pg-max-conns (%d) (got %d)", maxConns, minConns)
	}
	return maxConns, minConns, nil
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// openDatabase opens a store on location (a resolved --database) for mode;
// sq configures the SQLite driver when location is a file path.
func openDatabase(c *cli.Context, location string, opts taskgraph.Options, sq tgsqlite.Options, mode openMode) (*taskgraph.Store, error) {
	kind, loc := databaseKind(location)
	if kind != databasePostgres {
		s, _, err := openSQLite(c.Context, loc, opts, sq, mode)
		return s, err
	}
	maxConns, minConns, err := pgPool(c)
	if err != nil {
		return nil, err
	}
	return openPostgres(c.Context, loc, opts, mode, maxConns, minConns)
}

// openSQLite opens a store on the SQLite file at path for mode, and returns
// its driver too, for what only SQLite has (Check, Backup); the store owns
// the driver.
func openSQLite(ctx context.Context, path string, opts taskgraph.Options, sq tgsqlite.Options, mode openMode) (*taskgraph.Store, *tgsqlite.Driver, error) {
	if mode == openReadOnly {
		return sqlitestore.OpenReadOnlyDriver(ctx, path, opts, sq)
	}
	return sqlitestore.OpenDriver(ctx, path, opts, sq)
}

// openPostgres opens a store on the PostgreSQL database at url.
func openPostgres(ctx context.Context, url string, opts taskgraph.Options, mode openMode, maxConns, minConns int) (*taskgraph.Store, error) {
	d, err := tgpostgres.Open(ctx, url, tgpostgres.Options{
		MaxConns: int32(maxConns), MinConns: int32(minConns), Logger: opts.Logger,
		ReadOnly: mode == openReadOnly,
	})
	if err != nil {
		return nil, err // the driver names the database, without its password
	}
	return taskgraph.OpenDriver(ctx, d, opts)
}
