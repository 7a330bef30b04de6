package taskgraph

import "github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"

// ErrUnavailable matches every error that means the store cannot commit a
// write now because of the database's environment rather than the request:
// ErrBusy, ErrDiskFull, ErrReadOnly, ErrFilesReplaced and ErrUnreachable.
// The failed write was not acknowledged; only with ErrFilesReplaced may it
// have reached the old files anyway. UnavailableReason tells which and
// whether a retry may succeed.
var ErrUnavailable = tgdriver.ErrUnavailable

var (
	// ErrBusy: another process held the database's write lock for longer
	// than the busy timeout (SQLite, Options.BusyTimeout), or no pooled
	// connection came free in time (PostgreSQL). Retryable.
	ErrBusy = tgdriver.ErrBusy
	// ErrDiskFull: the filesystem holding the database has no space left.
	// Retryable once space is freed.
	ErrDiskFull = tgdriver.ErrDiskFull
	// ErrReadOnly: the database cannot be written (read-only mount,
	// permissions, a PostgreSQL standby). Not retryable until an operator
	// makes it writable.
	ErrReadOnly = tgdriver.ErrReadOnly
	// ErrFilesReplaced: the SQLite database file, its -wal or its -shm was
	// removed or replaced while the store had it open; writes are refused
	// until the store is closed and opened again.
	ErrFilesReplaced = tgdriver.ErrFilesReplaced
	// ErrUnreachable: the database server could not be reached or dropped
	// the connection (PostgreSQL). Retryable.
	ErrUnreachable = tgdriver.ErrUnreachable
)

// ErrReadOnlyStore matches the error every write of a store opened with
// OpenReadOnly returns (creating, claiming, holder writes, operator writes,
// lease expiry, pruning).
var ErrReadOnlyStore = tgdriver.ErrReadOnlyStore

// UnavailableReason reports why err means the database is unavailable:
// "busy", "disk_full", "read_only", "files_replaced" or "unreachable", and
// whether retrying the same call later may succeed. ok is false if err does
// not match ErrUnavailable.
func UnavailableReason(err error) (reason string, retryable, ok bool) {
	return tgdriver.UnavailableReason(err)
}
