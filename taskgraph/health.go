package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"
)

// DefaultBusyTimeout is how long a write waits for another process's write
// lock before it fails with ErrBusy, when Options.BusyTimeout is 0. It is
// well under the shortest useful lease (lease.DefaultDuration is 30 s), so a
// heartbeat that meets a lock learns so while its lease still runs.
const DefaultBusyTimeout = 10 * time.Second

// ErrUnavailable matches every error that means the store cannot commit a
// write now because of the database's environment rather than the request:
// ErrBusy, ErrDiskFull, ErrReadOnly and ErrFilesReplaced. The failed write
// was not acknowledged; only with ErrFilesReplaced may it have reached the
// old files anyway. UnavailableReason tells which and whether a retry may
// succeed.
var ErrUnavailable = errors.New("database unavailable")

var (
	// ErrBusy: another process held the database's write lock for longer
	// than the busy timeout (Options.BusyTimeout). Retryable.
	ErrBusy error = &unavailableError{reason: "busy", retryable: true,
		msg: "database busy: locked by another process"}
	// ErrDiskFull: the filesystem holding the database (or its -wal) has no
	// space left, or the process may not grow the file further. Retryable
	// once space is freed.
	ErrDiskFull error = &unavailableError{reason: "disk_full", retryable: true,
		msg: "database disk full: no space left to write the database"}
	// ErrReadOnly: the database file, its -wal or its folder cannot be
	// written (read-only mount, immutable file, permissions). Not retryable
	// until an operator makes it writable.
	ErrReadOnly error = &unavailableError{reason: "read_only",
		msg: "database read-only: the database file or its folder cannot be written"}
	// ErrFilesReplaced: the database file, its -wal or its -shm was removed
	// or replaced while the store had it open. Writes made now could be lost
	// or could corrupt the database, so the store refuses every later write
	// until it is closed and opened again. Not retryable against this store.
	ErrFilesReplaced error = &unavailableError{reason: "files_replaced",
		msg: "database files replaced: the database file, its -wal or its -shm was removed or replaced while the server had it open; writes are refused until the server is restarted"}
)

// unavailableError is the type of the ErrUnavailable family: each sentinel
// is itself and also matches ErrUnavailable.
type unavailableError struct {
	reason    string
	msg       string
	retryable bool
}

func (e *unavailableError) Error() string { return e.msg }

// Is makes every unavailableError match ErrUnavailable.
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// UnavailableReason reports why err means the database is unavailable:
// "busy", "disk_full", "read_only" or "files_replaced", and whether retrying
// the same call later may succeed. ok is false if err does not match
// ErrUnavailable.
func UnavailableReason(err error) (reason string, retryable, ok bool) {
	var ue *unavailableError
	if !errors.As(err, &ue) {
		return "", false, false
	}
	return ue.reason, ue.retryable, true
}

// classify turns an SQLite error caused by the database's environment into
// the matching ErrUnavailable sentinel, wrapping the original; any other
// error is returned as is. SQLite's own "database file moved" trips the
// store.
func (s *Store) classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	c := classifyErr(err, s.opts.BusyTimeout)
	if errors.Is(c, ErrFilesReplaced) {
		return s.trip(c, s.path)
	}
	return c
}

// classifyErr is classify without a store (for Open's first reads).
func classifyErr(err error, busyTimeout time.Duration) error {
	var se sqlite3.Error
	if err == nil || errors.Is(err, ErrUnavailable) || !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked:
		return fmt.Errorf("%w: the write could not get the database within %s (the busy timeout); nothing was written, retry shortly (%w)", ErrBusy, busyTimeout, err)
	case se.ExtendedCode == sqlite3.ErrReadonlyDbMoved:
		return fmt.Errorf("%w (%w)", ErrFilesReplaced, err)
	case se.Code == sqlite3.ErrFull, isErrno(se.SystemErrno, syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG):
		return fmt.Errorf("%w: nothing was written; free space on the database's filesystem, then retry (%w)", ErrDiskFull, err)
	case se.Code == sqlite3.ErrReadonly, isErrno(se.SystemErrno, syscall.EROFS, syscall.EPERM, syscall.EACCES):
		return fmt.Errorf("%w: nothing was written; an operator must make the database writable (%w)", ErrReadOnly, err)
	}
	return err
}

// refineOpenErr wraps an error of Open with ErrReadOnly when the database's
// folder refuses a new file (a read-only mount, permissions): SQLite reports
// that case only as "unable to open database file", since it cannot create
// the -wal or -shm it needs.
func refineOpenErr(path string, err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	f, cerr := os.CreateTemp(filepath.Dir(path), ".graph-engineering-write-check-*")
	if cerr == nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if errors.Is(cerr, syscall.EROFS) || errors.Is(cerr, os.ErrPermission) {
		return fmt.Errorf("%w: cannot create a file beside %s (%w): %w", ErrReadOnly, path, cerr, err)
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
// its -wal and its -shm as the store opened them, and trips once any of them
// is removed or replaced. SQLite keeps all three open while the store is, so
// their inodes cannot be reused while the check runs.
type fileGuard struct {
	paths [3]string
	ids   [3]os.FileInfo
	mu    sync.Mutex // orders trip's log line and err
	err   error      // non-nil once tripped; read under mu or via tripped
}

// recordFiles notes the identity of the database files. It runs after the
// write connection has opened the WAL.
func (s *Store) recordFiles() error {
	g := &s.files
	g.paths = [3]string{s.path, s.path + "-wal", s.path + "-shm"}
	for i, p := range g.paths {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("open database %s: %s is missing after opening it in WAL mode: %w", s.path, p, err)
		}
		g.ids[i] = fi
	}
	return nil
}

// tripped returns the ErrFilesReplaced error once the guard has tripped,
// nil before.
func (s *Store) tripped() error {
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	return s.files.err
}

// trip records err (matching ErrFilesReplaced) as the reason every later
// write fails, logs it once naming file, and returns the recorded error.
func (s *Store) trip(err error, file string) error {
	g := &s.files
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
		s.log.Error("database file removed or replaced underneath the server; refusing every further write until restart",
			"file", file, "database", s.path, "err", err)
	}
	return g.err
}

// checkFiles returns the ErrFilesReplaced error if the guard has tripped or
// any database file is now missing or another file; nil otherwise.
func (s *Store) checkFiles() error {
	if err := s.tripped(); err != nil {
		return err
	}
	g := &s.files
	if g.ids[0] == nil {
		return nil // not recorded (Open failed before): nothing to compare
	}
	for i, p := range g.paths {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return s.trip(fmt.Errorf("%w: %s was removed", ErrFilesReplaced, p), p)
		case err != nil:
			// Cannot tell (e.g. the folder became unreadable): not proof of a
			// replacement; the write itself reports what is wrong.
			continue
		case !os.SameFile(fi, g.ids[i]):
			return s.trip(fmt.Errorf("%w: %s is a different file than the one opened", ErrFilesReplaced, p), p)
		}
	}
	return nil
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

// Ready reports whether the store can commit a write now: nil, or an error
// matching ErrUnavailable (ErrBusy, ErrDiskFull, ErrReadOnly,
// ErrFilesReplaced) or ErrClosed. It checks the database files' identity and
// commits a probe write through the writer, like any other write; if ctx ends
// before the probe commits (the writer waits for a lock, or for a slow disk),
// the error matches ErrBusy. It never changes the data.
func (s *Store) Ready(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.checkFiles(); err != nil {
		return err
	}
	// The writer does not look at ctx while it waits for a lock, so the
	// probe is waited for here: it stays queued and is skipped, or finishes
	// harmlessly, after Ready has answered.
	probe := &op{ctx: ctx, done: make(chan struct{}), fn: func(w *wtx) error {
		for _, q := range probeSQL {
			if _, err := w.exec(q); err != nil {
				return err
			}
		}
		return nil
	}}
	errc := make(chan error, 1)
	go func() { errc <- s.submit(probe) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%w: a probe write did not commit within the readiness deadline; the write lock is held by another process or the disk is slow (%w)", ErrBusy, err)
	}
	return s.classify(err)
}
