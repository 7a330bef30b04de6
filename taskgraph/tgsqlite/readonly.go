package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"

	"github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// ErrNoDatabase matches the error OpenReadOnly and Checkpoint return when
// there is no database at the path: no file, or an empty one that no server
// has initialised. It also matches fs.ErrNotExist when the file is missing.
var ErrNoDatabase = errors.New("no database")

// OpenReadOnly opens the existing database at path for reading only, for
// operator commands that must never write or wait on the file beside a
// running server. It connects with SQLite's read-only mode and query_only,
// sets no journal mode, applies no migration (a schema older or newer than
// this binary's is refused: schema.ErrTooOld, schema.ErrTooNew), starts no
// writer nor change watcher, and its Close runs no checkpoint. Every Write
// returns an error matching tgdriver.ErrReadOnlyStore. Backup and Check work
// on it.
//
// Of opts it uses Logger, BusyTimeout and ReadConns; the others concern
// writes and are ignored.
func OpenReadOnly(ctx context.Context, path string, opts Options) (*Driver, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: database: a path is required", ErrInvalidOption)
	}
	opts.readDefaults()
	if err := requireDatabaseFile(path, "open database %s read-only"); err != nil {
		return nil, err
	}
	rdb, err := openReadOnlyDB(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	if _, err := requireLatest(ctx, rdb); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("open database %s read-only: %w", path, describeOpenErr(err))
	}
	d := &Driver{path: path, opts: opts, log: opts.Logger, rdb: rdb, rstmts: newReadStmts(rdb), readOnly: true, quit: make(chan struct{})}
	d.reads = &reads{q: poolQuerier{d.rstmts}}
	return d, nil
}

// requireDatabaseFile refuses a path where there is no database to open
// without creating one: nothing, a folder, or an empty file. step is a
// format naming what failed, with a %s for the path.
func requireDatabaseFile(path, step string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w at %s: %w (this never creates one; serve creates it on first start)", ErrNoDatabase, path, err)
	case err != nil:
		return fmt.Errorf(step+": %w", path, err)
	case fi.IsDir():
		return fmt.Errorf(step+": it is a folder; give the database file's path", path)
	case fi.Size() == 0:
		return fmt.Errorf("%w at %s: the file is empty (serve initialises a new database on first start)", ErrNoDatabase, path)
	}
	return nil
}

// readOnlyDSN is the data source name of a connection that can only read the
// file at path: SQLite opens it with SQLITE_OPEN_READONLY (mode=ro), so it
// cannot write the database or the WAL, nor checkpoint, not even as the last
// connection to close; query_only refuses writing statements with an error.
// It sets no journal mode: a rollback-journal file stays one. With immutable,
// immutable=1 too: SQLite then reads the file without the -shm and locks of
// WAL mode, assuming no one changes it meanwhile; openReadOnlyDB uses it only
// where the -shm cannot be created and there is no WAL content to miss.
func readOnlyDSN(path string, opts Options, immutable bool) string {
	q := url.Values{}
	q.Set("mode", "ro")
	if immutable {
		q.Set("immutable", "1")
	}
	q.Set("_busy_timeout", msString(opts.BusyTimeout))
	q.Set("_foreign_keys", "on")
	q.Set("_query_only", "on")
	q.Set("_txlock", "deferred")
	return fileDSN(path, q)
}

// openReadOnlyDB opens a read-only pool on path. A WAL database whose -shm
// does not exist and cannot be created (a read-only folder or mount: the
// only way SQLite fails to create it when opening) is opened immutable
// when it has no WAL content, which is then all of the database; with WAL
// content it is refused, saying why and what to do, since reading it needs
// the -shm.
func openReadOnlyDB(ctx context.Context, path string, opts Options) (*sql.DB, error) {
	db, err := openReadOnlyPool(ctx, path, opts, false)
	if err == nil {
		return db, nil
	}
	var se sqlite3.Error
	if !errors.As(err, &se) || se.Code != sqlite3.ErrCantOpen {
		return nil, fmt.Errorf("open database %s read-only: %w", path, describeOpenErr(err))
	}
	if _, serr := os.Stat(path + "-shm"); !errors.Is(serr, fs.ErrNotExist) {
		return nil, fmt.Errorf("open database %s read-only: %w", path, err)
	}
	if n, werr := walBytes(path); werr != nil || n > 0 {
		return nil, fmt.Errorf("open database %s read-only: SQLite must create %s-shm to read the writes in its -wal (%d bytes), and cannot: "+
			"the folder is read-only; copy the database with its -wal to a writable folder, or open it where the folder is writable: %w", path, path, n, err)
	}
	db, err = openReadOnlyPool(ctx, path, opts, true)
	if err != nil {
		return nil, fmt.Errorf("open database %s read-only (immutable: its folder is read-only and it has no -wal): %w", path, describeOpenErr(err))
	}
	return db, nil
}

func openReadOnlyPool(ctx context.Context, path string, opts Options, immutable bool) (*sql.DB, error) {
	db, err := sql.Open(driverName, readOnlyDSN(path, opts, immutable))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(opts.ReadConns)
	db.SetMaxIdleConns(opts.ReadConns)
	db.SetConnMaxLifetime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// ReadOnly reports whether the driver was opened with OpenReadOnly.
func (d *Driver) ReadOnly() bool { return d.readOnly }

// errReadOnly is the error a write on a read-only driver returns.
func (d *Driver) errReadOnly() error {
	return fmt.Errorf("%w: %s was opened for reading only, so this write was refused (writes go through a server or a read-write operator command such as admin or db prune)", tgdriver.ErrReadOnlyStore, d.path)
}

// walBytes returns the size of the WAL file of the database at path, 0 if
// there is none.
func walBytes(path string) (int64, error) {
	fi, err := os.Stat(path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the WAL's size: %w", err)
	}
	return fi.Size(), nil
}
