package tgdriver

import "errors"

// ErrNoRows means a lookup found nothing.
var ErrNoRows = errors.New("no such row")

// ErrChainMoved means AppendEvents or LinkJournaled found a chain head moved
// from the one the events link to. It is a fault of the caller's
// serialisation (a missing LockWorkflow, or two linkers of one journal),
// never of the input; the operation rolls back.
var ErrChainMoved = errors.New("the chain head moved while events were appended")

// ErrGuardFailed means an update of Tx.Apply did not hold its guard. The
// caller decided on rows it had locked, so it is a fault of the caller,
// never of the input; the transaction rolls back.
var ErrGuardFailed = errors.New("a guarded update of a batch changed no row")

// ErrRowChanged means an update guarded on what its transaction had read
// of the row changed no row: a writer that does not take the same locks
// changed it in between (PostgreSQL's hot batches lock task rows, not
// their workflow's, so a reload after LockWorkflow can be stale). Nothing
// is written; a driver with concurrent writers runs the transaction again
// (its reads then see the change), and with one writer (SQLite) it is a
// fault that rolls back.
var ErrRowChanged = errors.New("a row changed between its read and its guarded update")

// ErrClosed means the driver is closed.
var ErrClosed = errors.New("store is closed")

// ErrReadOnlyStore means the driver was opened read-only and refuses writes.
var ErrReadOnlyStore = errors.New("store is open read-only")

// ErrUnavailable matches every error that means the database cannot commit
// a write now because of its environment rather than the request: ErrBusy,
// ErrDiskFull, ErrReadOnly, ErrFilesReplaced, ErrUnreachable and
// ErrUnknownOutcome. With ErrBusy, ErrDiskFull, ErrReadOnly and
// ErrUnreachable nothing was written: the database refused or never got the
// commit. With ErrUnknownOutcome the commit was sent and its answer lost, and
// with ErrFilesReplaced it reached files that may no longer be the database's:
// the write may have taken effect. UnavailableReason tells which and whether
// a retry may succeed; MayHaveApplied whether the write may have happened.
var ErrUnavailable = errors.New("database unavailable")

var (
	// ErrBusy: another process held the database's write lock (SQLite), or
	// no connection of the pool came free (PostgreSQL), for longer than the
	// driver waits. Retryable.
	ErrBusy error = &UnavailableError{Reason: "busy", Retryable: true,
		Msg: "database busy: locked by another process"}
	// ErrDiskFull: the filesystem holding the database has no space left, or
	// the process may not grow the file further. Retryable once space is
	// freed.
	ErrDiskFull error = &UnavailableError{Reason: "disk_full", Retryable: true,
		Msg: "database disk full: no space left to write the database"}
	// ErrReadOnly: the database cannot be written (a read-only mount,
	// permissions, a PostgreSQL standby or read-only transaction). Not
	// retryable until an operator makes it writable.
	ErrReadOnly error = &UnavailableError{Reason: "read_only",
		Msg: "database read-only: the database file or its folder cannot be written"}
	// ErrFilesReplaced: the SQLite database file, its -wal or its -shm was
	// removed or replaced while the store had it open. Not retryable
	// against this store.
	ErrFilesReplaced error = &UnavailableError{Reason: "files_replaced", MayHaveApplied: true,
		Msg: "database files replaced: the database file, its -wal or its -shm was removed or replaced while the server had it open; writes are refused until the server is restarted"}
	// ErrUnreachable: the database server could not be reached or dropped
	// the connection before the write's COMMIT was sent, so nothing was
	// written. Retryable.
	ErrUnreachable error = &UnavailableError{Reason: "unreachable", Retryable: true,
		Msg: "database unreachable: the connection to the database server failed before anything was committed"}
	// ErrUnknownOutcome: the write's COMMIT was sent, or SQLite began making
	// it durable, and then the answer was lost (the connection dropped, the
	// database server shut down or crashed, an I/O error while the commit was
	// made durable): the write may or may not have been applied. Not
	// retryable blindly: a retried claim could take a second lease, a retried
	// complete be refused as already finished. Inspect the task first.
	ErrUnknownOutcome error = &UnavailableError{Reason: "unknown_outcome", MayHaveApplied: true,
		Msg: "database commit outcome unknown: the write was sent to be committed and the answer was lost, so it may have been applied: retry with the same request id, or inspect the task before retrying"}
)

// Unavailables lists every sentinel of the ErrUnavailable family, for
// documentation and tests that must cover each reason.
func Unavailables() []error {
	return []error{ErrBusy, ErrDiskFull, ErrReadOnly, ErrFilesReplaced, ErrUnreachable, ErrUnknownOutcome}
}

// UnavailableError is the type of the ErrUnavailable family: each sentinel
// is itself and also matches ErrUnavailable.
type UnavailableError struct {
	Reason string
	Msg    string
	// Retryable: the same call, retried later unchanged, may succeed and
	// cannot do harm.
	Retryable bool
	// MayHaveApplied: the failed write may nevertheless have taken effect.
	MayHaveApplied bool
}

func (e *UnavailableError) Error() string { return e.Msg }

// Is makes every UnavailableError match ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// UnavailableReason reports why err means the database is unavailable, and
// whether retrying the same call later may succeed; ok is false if err does
// not match ErrUnavailable.
func UnavailableReason(err error) (reason string, retryable, ok bool) {
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		return "", false, false
	}
	return ue.Reason, ue.Retryable, true
}

// MayHaveApplied reports whether err, an error of a write, leaves open
// whether the write took effect: ErrUnknownOutcome and ErrFilesReplaced.
// Every other ErrUnavailable error means nothing was written.
func MayHaveApplied(err error) bool {
	var ue *UnavailableError
	return errors.As(err, &ue) && ue.MayHaveApplied
}
