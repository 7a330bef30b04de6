package taskgraph

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
// file, while the store keeps serving: it reads one snapshot (VACUUM INTO)
// and never blocks writers. The copy is a complete database that Open
// accepts. dest must not exist.
func (s *Store) Backup(ctx context.Context, dest string) error {
	if dest == "" {
		return invalid("destination", "a path for the backup file is required")
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
	// A connection of its own: the read pool is query_only, and the writer's
	// connection must not be held for the length of a copy. VACUUM INTO
	// reads in one read transaction, so writers go on meanwhile.
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: s.path}).EscapedPath()+"?_busy_timeout="+fmt.Sprint(s.opts.BusyTimeout.Milliseconds()))
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
