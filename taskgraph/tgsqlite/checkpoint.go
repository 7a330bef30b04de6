package tgsqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
)

// CheckpointResult reports Checkpoint.
type CheckpointResult struct {
	// WALFrames is the number of frames the WAL held; CopiedFrames how many
	// of them are now in the database file. Both are -1 when the database is
	// not in WAL mode.
	WALFrames, CopiedFrames int
	// Truncated reports whether the WAL was emptied to zero bytes. It is
	// false when, at that moment, a reader still used the WAL or a writer
	// held the write lock: Checkpoint does not wait for them.
	Truncated bool
	// WALBytes is the size of the -wal file afterwards.
	WALBytes int64
}

// Checkpoint is the explicit operator checkpoint of the database at path,
// beside running servers: it copies into the database file every WAL frame no
// reader still needs (PRAGMA wal_checkpoint(PASSIVE), which takes no write
// lock), then, only if no reader uses the WAL and no writer holds the write
// lock at that moment, truncates the WAL to zero bytes (TRUNCATE). Its
// connection has a busy timeout of zero, so neither step ever waits for a
// reader or a writer, and the write lock is held only for the second step,
// which copies just what was committed since the first and truncates. It
// never creates a database, never migrates, and refuses a file that is not a
// graph-engineering database (schema.ErrForeign, schema.ErrTooNew).
func Checkpoint(ctx context.Context, path string) (CheckpointResult, error) {
	res := CheckpointResult{WALFrames: -1, CopiedFrames: -1}
	if err := requireDatabaseFile(path, "checkpoint database %s"); err != nil {
		return res, err
	}
	q := url.Values{}
	q.Set("_busy_timeout", "0")
	db, err := sql.Open(driverName, fileDSN(path, q))
	if err != nil {
		return res, fmt.Errorf("checkpoint database %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return res, fmt.Errorf("checkpoint database %s: %w", path, describeOpenErr(err))
	}
	defer conn.Close()
	if _, err := inspectSchema(ctx, conn); err != nil {
		return res, fmt.Errorf("checkpoint database %s: %w", path, describeOpenErr(err))
	}
	var busy int
	if err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &res.WALFrames, &res.CopiedFrames); err != nil {
		return res, fmt.Errorf("checkpoint database %s: %w", path, err)
	}
	if res.WALFrames >= 0 {
		var frames, copied int
		if err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied); err != nil {
			return res, fmt.Errorf("checkpoint database %s: truncate the WAL: %w", path, err)
		}
		res.Truncated = busy == 0
		if res.Truncated {
			res.CopiedFrames = res.WALFrames
		}
	}
	if res.WALBytes, err = walBytes(path); err != nil {
		return res, fmt.Errorf("checkpoint database %s: %w", path, err)
	}
	return res, nil
}
