package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// startReadyTimeout bounds serve's start-up write check: longer than the
// busy timeout, so a lock another process holds briefly is waited out.
const startReadyTimeout = tgsqlite.DefaultBusyTimeout + 5*time.Second

// openServeStore opens the database for serve and checks that it can commit
// a write (Store.Ready) before anything is served. A database that cannot
// be written (read-only file, folder or mount; full disk) is refused with a
// usage error (exit 2) naming the path; one that stays locked by another
// process is an ordinary failure (exit 1) naming the path.
func openServeStore(c *cli.Context, path string, opts taskgraph.Options, sq tgsqlite.Options) (*taskgraph.Store, error) {
	store, err := openDatabase(c, path, opts, sq, openServe)
	if err == nil {
		ctx, cancel := context.WithTimeout(c.Context, startReadyTimeout)
		err = store.Ready(ctx)
		cancel()
		if err != nil {
			store.Close()
		}
	}
	if err == nil {
		return store, nil
	}
	reason, _, _ := taskgraph.UnavailableReason(err)
	switch reason {
	case "read_only", "disk_full":
		return nil, usagef("refusing to serve database %s: it cannot be written: %v", redactDatabase(path), err)
	case "":
		return nil, err
	}
	return nil, fmt.Errorf("refusing to serve database %s: %w", redactDatabase(path), err)
}
