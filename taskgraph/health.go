package taskgraph

import "github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"

// ErrUnavailable matches every error that means the store cannot commit a
// write now because of the database's environment rather than the request:
// ErrBusy, ErrDiskFull, ErrReadOnly, ErrFilesReplaced, ErrUnreachable and
// ErrUnknownOutcome. The failed write was not acknowledged; with
// ErrUnknownOutcome (the commit's answer was lost) and ErrFilesReplaced it
// may have taken effect anyway (MayHaveApplied), with the others nothing was
// written. UnavailableReason tells which and whether a retry may succeed.
var ErrUnavailable = tgdriver.ErrUnavailable

var (
	// ErrBusy: another process held the database's write lock for longer
	// than the busy timeout (SQLite, tgsqlite.Options.BusyTimeout), or no pooled
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
	// the connection before the write was committed (PostgreSQL); nothing
	// was written. Retryable.
	ErrUnreachable = tgdriver.ErrUnreachable
	// ErrUnknownOutcome: the write's commit was sent and its answer lost
	// (the connection to PostgreSQL dropped at COMMIT, the server shut down,
	// an I/O error while SQLite made the commit durable): the write may or
	// may not have been applied. Not blindly retryable: inspect the task
	// first.
	ErrUnknownOutcome = tgdriver.ErrUnknownOutcome
)

// UnavailableErrors lists every sentinel matching ErrUnavailable.
func UnavailableErrors() []error { return tgdriver.Unavailables() }

// MayHaveApplied reports whether a failed write may nevertheless have taken
// effect (ErrUnknownOutcome, ErrFilesReplaced): the caller must inspect
// before retrying. For every other error of a write, nothing was written.
func MayHaveApplied(err error) bool { return tgdriver.MayHaveApplied(err) }

// ErrReadOnlyStore matches the error every write of a store on a read-only
// driver returns (creating, claiming, holder writes, operator writes,
// lease expiry, pruning).
var ErrReadOnlyStore = tgdriver.ErrReadOnlyStore

// UnavailableReason reports why err means the database is unavailable:
// "busy", "disk_full", "read_only", "files_replaced", "unreachable" or
// "unknown_outcome", and
// whether retrying the same call later may succeed. ok is false if err does
// not match ErrUnavailable.
func UnavailableReason(err error) (reason string, retryable, ok bool) {
	return tgdriver.UnavailableReason(err)
}
