package sqlitestore

import (
	"context"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// Open opens (creating if needed) the SQLite database at path with the
// driver options drv, applies pending migrations, and starts a store on it
// with opts (see tgsqlite.Open and taskgraph.OpenDriver).
func Open(ctx context.Context, path string, opts taskgraph.Options, drv tgsqlite.Options) (*taskgraph.Store, error) {
	s, _, err := OpenDriver(ctx, path, opts, drv)
	return s, err
}

// OpenDriver is Open that also returns the store's driver, for the
// operations only a SQLite file has (Backup, Check). The store owns the
// driver: closing the store closes it.
func OpenDriver(ctx context.Context, path string, opts taskgraph.Options, drv tgsqlite.Options) (*taskgraph.Store, *tgsqlite.Driver, error) {
	if drv.Logger == nil {
		drv.Logger = opts.Logger
	}
	d, err := tgsqlite.Open(ctx, path, drv)
	if err != nil {
		return nil, nil, err
	}
	s, err := taskgraph.OpenDriver(ctx, d, opts)
	if err != nil {
		return nil, nil, err
	}
	return s, d, nil
}

// OpenReadOnly opens the existing SQLite database at path for reading only
// (see tgsqlite.OpenReadOnly) and starts a store on it: every write method
// returns an error matching taskgraph.ErrReadOnlyStore, nothing is migrated
// and no background loop runs. Of drv it uses Logger, BusyTimeout and
// ReadConns.
func OpenReadOnly(ctx context.Context, path string, opts taskgraph.Options, drv tgsqlite.Options) (*taskgraph.Store, error) {
	s, _, err := OpenReadOnlyDriver(ctx, path, opts, drv)
	return s, err
}

// OpenReadOnlyDriver is OpenReadOnly that also returns the store's driver,
// owned by the store, for Backup and Check.
func OpenReadOnlyDriver(ctx context.Context, path string, opts taskgraph.Options, drv tgsqlite.Options) (*taskgraph.Store, *tgsqlite.Driver, error) {
	if drv.Logger == nil {
		drv.Logger = opts.Logger
	}
	d, err := tgsqlite.OpenReadOnly(ctx, path, drv)
	if err != nil {
		return nil, nil, err
	}
	opts.Sweep = false
	s, err := taskgraph.OpenDriver(ctx, d, opts)
	if err != nil {
		return nil, nil, err
	}
	return s, d, nil
}
