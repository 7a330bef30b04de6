package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

func dbBackupCommand() *cli.Command {
	return &cli.Command{
		Name:      "backup",
		Usage:     "write a consistent copy of the database to a new file, while servers keep running",
		UsageText: "graph-engineering-mcp db backup [--database PATH] DEST",
		Description: `Copies one consistent snapshot of the database (SQLite's VACUUM INTO) to DEST,
a new file, without stopping or blocking servers on the database. The copy is a
complete database: restore it by stopping the server and putting it in place of
the database file (and removing any -wal and -shm files beside it), or point
--database at it. DEST must not exist.

Example:
   graph-engineering-mcp db backup --database ./tasks.db ./tasks-backup.db`,
		Flags: []cli.Flag{databaseFlag()},
		Action: leafAction([]string{"DEST"}, func(c *cli.Context, args []string) error {
			if kind, _, err := resolveDatabase(c); err != nil {
				return err
			} else if kind == databasePostgres {
				return usagef("db backup copies an SQLite database file; for PostgreSQL use its own tools: pg_dump --format=custom --file=DEST URL (a consistent snapshot, restored with pg_restore), or continuous archiving for point-in-time recovery")
			}
			return withReadOnlySQLite(c, func(ctx context.Context, s *taskgraph.Store, d *tgsqlite.Driver) error {
				if err := d.Backup(ctx, args[0]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(c.App.Writer, "backed up %s to %s\n", s.Path(), args[0])
				return err
			})
		}),
	}
}
