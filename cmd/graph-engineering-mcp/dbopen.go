package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
)

// This file opens a store on either driver: a file path is SQLite
// (taskgraph.Open, taskgraph.OpenReadOnly), a postgres:// or postgresql://
// URL is PostgreSQL (tgpostgres under taskgraph.OpenDriver).

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

// openDatabase opens a store on location (a resolved --database) for mode.
func openDatabase(c *cli.Context, location string, opts taskgraph.Options, mode openMode) (*taskgraph.Store, error) {
	kind, loc := databaseKind(location)
	if kind != databasePostgres {
		if mode == openReadOnly {
			return taskgraph.OpenReadOnly(c.Context, loc, opts)
		}
		return taskgraph.Open(c.Context, loc, opts)
	}
	maxConns, minConns, err := pgPool(c)
	if err != nil {
		return nil, err
	}
	return openPostgres(c.Context, loc, opts, mode, maxConns, minConns)
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
