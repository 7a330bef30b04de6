package tgsqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// classify turns an SQLite error caused by the database's environment into
// the matching tgdriver sentinel, wrapping the original; any other error is
// returned as is. SQLite's own "database file moved" trips the driver.
func (d *Driver) classify(err error) error {
	if err == nil || errors.Is(err, tgdriver.ErrUnavailable) {
		return err
	}
	c := classifyErr(err, d.opts.BusyTimeout)
	if errors.Is(c, tgdriver.ErrFilesReplaced) {
		return d.trip(c, d.path)
	}
	return c
}

// classifyCommit maps an error of a batch's COMMIT. SQLite commits
// atomically, and in WAL mode the commit frame is the last one written:
// BUSY or LOCKED (the transaction is still open, and is rolled back), FULL,
// READONLY, or an I/O error while the frames were still being written or read
// (the commit frame was not written whole) leave nothing written, and keep
// the usual sentinels when the cause is one. An I/O error once the frames
// may all have been written (syncing the WAL or its folder, updating the
// WAL index) or any failure the driver cannot place may leave a complete
// commit in the WAL, which the next opener's recovery or a reader then
// finds: the outcome is unknown, tgdriver.ErrUnknownOutcome.
func (d *Driver) classifyCommit(err error) error {
	if err == nil {
		return nil
	}
	var se sqlite3.Error
	if !errors.As(err, &se) || se.Code != sqlite3.ErrIoErr || beforeCommitFrame[se.ExtendedCode] {
		if c := d.classify(err); errors.Is(c, tgdriver.ErrUnavailable) {
			return c
		}
	}
	return fmt.Errorf("%w (%w)", tgdriver.ErrUnknownOutcome, err)
}

// beforeCommitFrame: I/O errors a COMMIT meets before its commit frame is
// written whole.
var beforeCommitFrame = map[sqlite3.ErrNoExtended]bool{
	sqlite3.ErrIoErrRead: true, sqlite3.ErrIoErrShortRead: true, sqlite3.ErrIoErrWrite: true,
	sqlite3.ErrIoErrFstat: true, sqlite3.ErrIoErrAccess: true, sqlite3.ErrIoErrNoMem: true,
	sqlite3.ErrIoErrLock: true, sqlite3.ErrIoErrRDlock: true, sqlite3.ErrIoErrCheckReservedLock: true,
	sqlite3.ErrIoErrSeek: true,
}

// classifyErr is classify without a driver (for Open's first reads).
func classifyErr(err error, busyTimeout time.Duration) error {
	var se sqlite3.Error
	if err == nil || errors.Is(err, tgdriver.ErrUnavailable) || !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked:
		return fmt.Errorf("%w: the write could not get the database within %s (the busy timeout); nothing was written, retry shortly (%w)", tgdriver.ErrBusy, busyTimeout, err)
	case se.ExtendedCode == sqlite3.ErrReadonlyDbMoved:
		return fmt.Errorf("%w (%w)", tgdriver.ErrFilesReplaced, err)
	case se.Code == sqlite3.ErrFull, isErrno(se.SystemErrno, syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG):
		return fmt.Errorf("%w: nothing was written; free space on the database's filesystem, then retry (%w)", tgdriver.ErrDiskFull, err)
	case se.Code == sqlite3.ErrReadonly, isErrno(se.SystemErrno, syscall.EROFS, syscall.EPERM, syscall.EACCES):
		return fmt.Errorf("%w: nothing was written; an operator must make the database writable (%w)", tgdriver.ErrReadOnly, err)
	}
	return err
}

// refineOpenErr wraps an error of Open with tgdriver.ErrReadOnly when the
// database's folder refuses a new file (a read-only mount, permissions):
// SQLite reports that case only as "unable to open database file", since it
// cannot create the -wal or -shm it needs.
func refineOpenErr(path string, err error) error {
	if err == nil || errors.Is(err, tgdriver.ErrUnavailable) {
		return err
	}
	f, cerr := os.CreateTemp(filepath.Dir(path), ".graph-engineering-write-check-*")
	if cerr == nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if errors.Is(cerr, syscall.EROFS) || errors.Is(cerr, os.ErrPermission) {
		return fmt.Errorf("%w: cannot create a file beside %s (%w): %w", tgdriver.ErrReadOnly, path, cerr, err)
	}
	return err
}

func isErrno(e syscall.Errno, of ...syscall.Errno) bool {
	for _, o := range of {
		if e != 0 && e == o {
			return true
		}
	}
	return false
}

// fileGuard remembers the identity (device and inode) of the database file,
// its -wal and its -shm as the driver opened them, and trips once any of
// them is removed or replaced. SQLite keeps all three open while the driver
// is, so their inodes cannot be reused while the check runs.
type fileGuard struct {
	paths [3]string
	ids   [3]os.FileInfo
	mu    sync.Mutex // orders trip's log line and err
	err   error      // non-nil once tripped; read under mu or via tripped
	// walBytes is the size of the -wal at the last check.
	walBytes atomic.Int64
}

// recordFiles notes the identity of the database files. It runs after the
// write connection has opened the WAL.
func (d *Driver) recordFiles() error {
	g := &d.files
	g.paths = [3]string{d.path, d.path + "-wal", d.path + "-shm"}
	for i, p := range g.paths {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("open database %s: %s is missing after opening it in WAL mode: %w", d.path, p, err)
		}
		g.ids[i] = fi
	}
	return nil
}

// tripped returns the ErrFilesReplaced error once the guard has tripped,
// nil before.
func (d *Driver) tripped() error {
	d.files.mu.Lock()
	defer d.files.mu.Unlock()
	return d.files.err
}

// trip records err (matching ErrFilesReplaced) as the reason every later
// write fails, logs it once naming file, and returns the recorded error.
func (d *Driver) trip(err error, file string) error {
	g := &d.files
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
		d.log.Error("database file removed or replaced underneath the server; refusing every further write until restart",
			"file", file, "database", d.path, "err", err)
	}
	return g.err
}

// checkFiles returns the ErrFilesReplaced error if the guard has tripped or
// any database file is now missing or another file; nil otherwise.
func (d *Driver) checkFiles() error {
	if err := d.tripped(); err != nil {
		return err
	}
	g := &d.files
	if g.ids[0] == nil {
		return nil // not recorded (Open failed before): nothing to compare
	}
	for i, p := range g.paths {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return d.trip(fmt.Errorf("%w: %s was removed%s", tgdriver.ErrFilesReplaced, p, d.lossAdvice(i)), p)
		case err != nil:
			// Cannot tell (e.g. the folder became unreadable): not proof of a
			// replacement; the write itself reports what is wrong.
			continue
		case !os.SameFile(fi, g.ids[i]):
			return d.trip(fmt.Errorf("%w: %s is a different file than the one opened%s", tgdriver.ErrFilesReplaced, p, d.lossAdvice(i)), p)
		}
		if i == 1 {
			g.walBytes.Store(fi.Size())
		}
	}
	return nil
}

// lossAdvice says, for the database file (0), its -wal (1) or its -shm (2)
// gone from its path, what acknowledged writes may be lost and how to find
// out: the server still holds the old file open, but nothing reopens it.
func (d *Driver) lossAdvice(i int) string {
	switch i {
	case 0:
		return "; every write this server acknowledged went to the file it still holds open, not to anything at that path now, " +
			"and is lost once the server stops unless that file is restored: stop the server, put the database back, and run " +
			"graph-engineering-mcp audit verify --anchor FILE (FILE from serve --audit-anchor) to see which workflows lost events"
	case 1:
		return fmt.Sprintf("; the writes acknowledged since the last checkpoint (up to %d bytes of WAL at the last check) lived only in it "+
			"and are lost when the server stops: run graph-engineering-mcp audit verify --anchor FILE (FILE from serve --audit-anchor) "+
			"after the restart to see which workflows lost events", d.files.walBytes.Load())
	}
	return "; no acknowledged write is in it, but the server cannot go on sharing the database safely with other processes"
}

// probeSQL is the readiness probe: two updates that change a value of the
// one schema_version row and change it back. SQLite writes nothing for an
// update that leaves a row's bytes as they were, but a page changed and
// restored stays dirty: the commit takes the write lock and appends the page
// to the WAL, so a lock held by another process, a full disk and a
// read-only file make it fail as a real write would, and the data is the
// same afterwards.
var probeSQL = [2]string{
	`UPDATE schema_version SET applied_at_ms = applied_at_ms + 1`,
	`UPDATE schema_version SET applied_at_ms = applied_at_ms - 1`,
}

// Ready reports whether the driver can commit a write now: nil, or an error
// matching tgdriver.ErrUnavailable (ErrBusy, ErrDiskFull, ErrReadOnly,
// ErrFilesReplaced) or ErrClosed; opened read-only, an error matching both
// ErrReadOnly and ErrReadOnlyStore, as a read-only PostgreSQL driver's. It
// checks the database files' identity and commits a probe write through the
// writer, like any other write; if ctx ends before the probe commits (the
// writer waits for a lock, or for a slow disk), the error matches ErrBusy.
// It never changes the data.
func (d *Driver) Ready(ctx context.Context) error {
	if d.closed.Load() {
		return tgdriver.ErrClosed
	}
	if d.readOnly {
		return fmt.Errorf("%w: %s was opened for reading only and commits no write (%w)", tgdriver.ErrReadOnly, d.path, tgdriver.ErrReadOnlyStore)
	}
	if err := d.checkFiles(); err != nil {
		return err
	}
	// The writer does not look at ctx while it waits for a lock, so the
	// probe is waited for here: it stays queued and is skipped, or finishes
	// harmlessly, after Ready has answered.
	probe := &op{ctx: ctx, done: make(chan struct{}), fn: func(tx tgdriver.Tx) error {
		t := tx.(*wtx)
		for _, q := range probeSQL {
			if _, err := t.exec(q); err != nil {
				return err
			}
		}
		return nil
	}}
	errc := make(chan error, 1)
	go func() { errc <- d.submit(probe) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, tgdriver.ErrUnavailable) {
		return fmt.Errorf("%w: a probe write did not commit within the readiness deadline; the write lock is held by another process or the disk is slow (%w)", tgdriver.ErrBusy, err)
	}
	return d.classify(err)
}
