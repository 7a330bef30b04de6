package tgpostgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// ErrBadURL means the URL given to Open is not a PostgreSQL URL.
var ErrBadURL = errors.New("invalid PostgreSQL URL")

// SQLSTATE codes the driver acts on.
const (
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeUniqueViolation      = "23505"
	codeDiskFull             = "53100"
	codeReadOnlyTransaction  = "25006"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	codeFeatureNotSupported  = "0A000"
	codeSyntaxError          = "42601"
	codeUndefinedFunction    = "42883"
	codeLockNotAvailable     = "55P03"
	codeQueryCanceled        = "57014"
	// codeGuardFailed is apply_guard's (migration 0022): a guarded update
	// of a batch's last round changed fewer rows than it was given.
	codeGuardFailed = "TG001"
)

// sqlState returns the SQLSTATE of err, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// retryable reports whether a failed transaction may succeed when run again
// from the start: a serialization failure, a deadlock, or a unique violation
// (two transactions creating the same row at once; the rerun sees the
// winner's row).
func retryable(err error) bool {
	if errors.Is(err, tgdriver.ErrRowChanged) {
		return true
	}
	switch sqlState(err) {
	case codeSerializationFailure, codeDeadlockDetected, codeUniqueViolation:
		return true
	}
	return false
}

// classify maps an error of the database's environment to the tgdriver
// sentinel it means, keeping the original for its details; any other error is
// returned as it is. ctx is the caller's context: its own cancellation is
// never reported as an unreachable database.
func (d *Driver) classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if _, _, ok := tgdriver.UnavailableReason(err); ok {
		return d.redact(err)
	}
	if errors.Is(err, tgdriver.ErrClosed) || errors.Is(err, tgdriver.ErrNoRows) || errors.Is(err, tgdriver.ErrChainMoved) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", tgdriver.ErrNoRows, err)
	}
	if d.closed.Load() && sqlState(err) == "" {
		// The pool was closed under the call.
		return fmt.Errorf("%w: %w", tgdriver.ErrClosed, d.redact(err))
	}
	err = serverAnswerFirst(err)
	if code := sqlState(err); code != "" {
		switch {
		case code == codeDiskFull:
			return d.wrap(tgdriver.ErrDiskFull, err)
		case code == codeReadOnlyTransaction:
			return d.wrap(tgdriver.ErrReadOnly, err)
		case strings.HasPrefix(code, "08"), code == codeAdminShutdown, code == codeCrashShutdown, code == codeCannotConnectNow,
			code == codeIdleInTransactionTimeout:
			return d.wrap(tgdriver.ErrUnreachable, err)
		case code == codeLockNotAvailable:
			return d.wrap(tgdriver.ErrBusy, fmt.Errorf("a lock another transaction held (another replica's write to the same workflow, or a replica stalled in the middle of one) was not granted within the lock timeout; nothing was written: %w", err))
		case code == codeGuardFailed:
			return fmt.Errorf("%w: %w", tgdriver.ErrGuardFailed, d.redact(err))
		case code == codeQueryCanceled && (ctx == nil || ctx.Err() == nil):
			return d.wrap(tgdriver.ErrBusy, fmt.Errorf("a statement ran beyond the statement timeout; nothing was written: %w", err))
		}
		return d.redact(err)
	}
	if ctx != nil && ctx.Err() != nil {
		return err
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed), strings.Contains(err.Error(), "conn closed"):
		return d.wrap(tgdriver.ErrUnreachable, err)
	}
	return d.redact(err)
}

// serverAnswerFirst puts the server's own answer first in the text of a
// failed connection: with sslmode=prefer (the default) pgx tries TLS, then
// plain text, and lists every attempt in order, so a wrong password read
// first as "tls error: server refused TLS connection". The error is kept
// whole behind it (%w), every attempt included.
func serverAnswerFirst(err error) error {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if !errors.As(err, &ce) || !errors.As(err, &pe) || !strings.Contains(err.Error(), "\n") {
		return err
	}
	return fmt.Errorf("the server answered %s: %s (SQLSTATE %s); every attempt: %w", pe.Severity, pe.Message, pe.Code, err)
}

// codeIdleInTransactionTimeout is the FATAL a session gets when it stayed
// idle inside a transaction beyond idle_in_transaction_session_timeout: the
// server ended it before reading any later command, COMMIT included.
const codeIdleInTransactionTimeout = "25P03"

// classifyCommit maps an error of a write transaction's COMMIT. Once the
// COMMIT may have reached the server, only the server's own answer that the
// transaction did not commit (an ERROR, which rolls it back, or the FATAL of
// a session ended while idle before the COMMIT was read) means nothing was
// written. Anything else (a connection lost while the COMMIT was in flight,
// a server shutting down or crashing, 57P01 and 57P02, the caller's context
// ending during the round trip) leaves the outcome unknown and is
// tgdriver.ErrUnknownOutcome, keeping the cause. pgconn.SafeToRetry cannot
// tell a COMMIT that was never sent: once a read fails pgx closes the
// connection and reports "conn closed", marked safe to retry, for the
// COMMIT it had already written.
func (d *Driver) classifyCommit(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return d.classify(ctx, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Severity == "ERROR" || pe.Code == codeIdleInTransactionTimeout) {
		return d.classify(ctx, err)
	}
	if d.closed.Load() && !errors.As(err, &pe) {
		// The pool was closed under the commit: its outcome is unknown too.
		return d.wrap(tgdriver.ErrUnknownOutcome, fmt.Errorf("%w: %w", tgdriver.ErrClosed, err))
	}
	return d.wrap(tgdriver.ErrUnknownOutcome, err)
}

// wrap returns an error matching sentinel (and so ErrUnavailable) that
// explains itself with the cause, whose text has the password removed.
func (d *Driver) wrap(sentinel, cause error) error {
	return &causeError{sentinel: sentinel, cause: d.redact(cause), location: d.location}
}

// causeError is a tgdriver sentinel with the database error behind it.
type causeError struct {
	sentinel error
	cause    error
	location string
}

// Error names the sentinel, the database and the cause.
func (e *causeError) Error() string {
	return fmt.Sprintf("%s (%s): %s", e.sentinel.Error(), e.location, e.cause.Error())
}

// Unwrap gives the sentinel and the (redacted) cause.
func (e *causeError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// redact returns err with every occurrence of the URL's password removed
// from its text. An error whose text never held the password is returned
// unchanged, so that errors.Is and errors.As keep working on it.
func (d *Driver) redact(err error) error { return redactErr(err, d.password) }

func redactErr(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), password, "xxxxx"), kept: keepSentinels(err)}
}

// redactedError carries an error's text with the password removed. It
// unwraps only to the tgdriver sentinels the original matched, never to the
// original (whose text holds the password).
type redactedError struct {
	msg  string
	kept []error
}

// Error is the original text with the password replaced.
func (e *redactedError) Error() string { return e.msg }

// Unwrap gives the sentinels the original matched.
func (e *redactedError) Unwrap() []error { return e.kept }

func keepSentinels(err error) []error {
	var kept []error
	for _, s := range []error{tgdriver.ErrBusy, tgdriver.ErrDiskFull, tgdriver.ErrReadOnly, tgdriver.ErrUnreachable,
		tgdriver.ErrUnknownOutcome, tgdriver.ErrClosed, tgdriver.ErrNoRows, tgdriver.ErrChainMoved, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, s) {
			kept = append(kept, s)
		}
	}
	return kept
}
