package main

import (
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
	"github.com/urfave/cli/v2"
)

func dbCheckpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "fold the WAL into the database file and empty it if nobody is using it; never waits",
		UsageText: "graph-engineering-mcp db checkpoint [--database PATH] [--json]",
		Description: `Copies into the database file every frame of the write-ahead log (the -wal
file) that no reader still needs, then empties the WAL if, at that moment, no
reader is using it and no writer is writing. It never waits for a reader or a
writer, so it is safe beside running servers and long readers (an audit
verify, a backup, a sqlite3 shell): when one is busy it reports that the WAL
was kept, and exits 0. Servers checkpoint by themselves; this is for an
operator who wants the WAL file small now.

Example:
   graph-engineering-mcp db checkpoint --database /var/lib/graph-engineering/tasks.db`,
		Flags:  []cli.Flag{databaseFlag(), jsonFlag()},
		Action: leafAction(nil, dbCheckpointAction),
	}
}

// checkpointJSON is the --json output of db checkpoint.
type checkpointJSON struct {
	Database     string `json:"database"`
	WALFrames    int    `json:"wal_frames"`
	CopiedFrames int    `json:"copied_frames"`
	Truncated    bool   `json:"truncated"`
	WALBytes     int64  `json:"wal_bytes"`
}

func dbCheckpointAction(c *cli.Context, _ []string) error {
	kind, path, err := resolveDatabase(c)
	if err != nil {
		return err
	}
	if kind == databasePostgres {
		return usagef("db checkpoint truncates an SQLite write-ahead log; PostgreSQL checkpoints by itself (CHECKPOINT, checkpoint_timeout), so there is nothing to do here")
	}
	res, err := tgsqlite.Checkpoint(c.Context, path)
	if missingDatabase(err) {
		return noDatabase(path)
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, checkpointJSON{Database: path, WALFrames: res.WALFrames, CopiedFrames: res.CopiedFrames, Truncated: res.Truncated, WALBytes: res.WALBytes})
	}
	w := c.App.Writer
	fmt.Fprintf(w, "database:   %s\n", path)
	switch {
	case res.WALFrames < 0:
		_, err = fmt.Fprintln(w, "checkpoint: nothing to do, the database is not in WAL mode")
	case res.Truncated:
		_, err = fmt.Fprintf(w, "checkpoint: complete, %d WAL frame(s) in the database file; WAL emptied\n", res.WALFrames)
	default:
		_, err = fmt.Fprintf(w, "checkpoint: %d of %d WAL frame(s) in the database file; WAL kept (%d bytes): a reader or writer was using it, and this does not wait (run again later)\n",
			res.CopiedFrames, res.WALFrames, res.WALBytes)
	}
	return err
}
