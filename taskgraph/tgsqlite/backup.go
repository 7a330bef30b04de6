package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// ErrBackupExists matches the error Backup returns when dest already exists.
var ErrBackupExists = errors.New("backup destination exists")

// Backup writes a consistent, compacted copy of the database to dest, a new
// file, while the driver keeps serving: it reads one snapshot (VACUUM INTO)
// and never blocks writers. It works on a read-only driver (OpenReadOnly)
// and writes nothing to the source. The copy is a complete database that
// Open accepts. dest must not exist.
func (d *Driver) Backup(ctx context.Context, dest string) error {
	if dest == "" {
		return fmt.Errorf("%w: destination: a path for the backup file is required", ErrInvalidOption)
	}
	if _, err := os.Stat(dest); err == nil {
		return fmt.Errorf("%w: %s (choose a new file; backups never overwrite)", ErrBackupExists, dest)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup to %s: %w", dest, err)
	}
	abs, err := filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("backup to %s: %w", dest, err)
	}
	// A connection of its own, opened read-only (mode=ro): the writer's
	// connection must not be held for the length of a copy, and the source
	// is only read, by a driver opened with Open or with OpenReadOnly alike.
	// VACUUM INTO reads in one read transaction, so writers go on meanwhile,
	// and a read-only connection can neither write the source nor checkpoint
	// it as it closes.
	db, err := sql.Open("sqlite3", backupSourceDSN(d.path, d.opts))
	if err != nil {
		return fmt.Errorf("backup to %s: %w", dest, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, abs); err != nil {
		os.Remove(abs)
		return fmt.Errorf("backup to %s: %w", dest, err)
	}
	return nil
}

// backupSourceDSN is the data source name of Backup's connection to the
// database it copies: read-only, without query_only, which would refuse
// VACUUM INTO's write of the new file.
func backupSourceDSN(path string, opts Options) string {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", msString(opts.BusyTimeout))
	return fileDSN(path, q)
}
