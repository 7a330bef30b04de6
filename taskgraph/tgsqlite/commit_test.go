package tgsqlite

import (
	"errors"
	"syscall"
	"testing"

	"github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// A failed COMMIT that SQLite guarantees left nothing written keeps its
// sentinel; an I/O error (whatever its errno) or any other failure of the
// COMMIT may have left a complete commit in the WAL: an unknown outcome.
func TestClassifyCommit(t *testing.T) {
	t.Parallel()
	d := openTest(t, Options{}, tgdriver.Hooks{})
	for _, c := range []struct {
		name string
		err  sqlite3.Error
		want error
	}{
		{"busy", sqlite3.Error{Code: sqlite3.ErrBusy}, tgdriver.ErrBusy},
		{"full", sqlite3.Error{Code: sqlite3.ErrFull}, tgdriver.ErrDiskFull},
		{"read-only", sqlite3.Error{Code: sqlite3.ErrReadonly}, tgdriver.ErrReadOnly},
		{"fsync failed", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrFsync, SystemErrno: syscall.EIO}, tgdriver.ErrUnknownOutcome},
		{"fsync out of space", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrFsync, SystemErrno: syscall.ENOSPC}, tgdriver.ErrUnknownOutcome},
		{"write refused", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrWrite, SystemErrno: syscall.EPERM}, tgdriver.ErrReadOnly},
		{"write out of space", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrWrite, SystemErrno: syscall.ENOSPC}, tgdriver.ErrDiskFull},
		{"write failed, cause unknown", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrWrite, SystemErrno: syscall.EIO}, tgdriver.ErrUnknownOutcome},
		{"WAL index update failed", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrSHMMap, SystemErrno: syscall.EIO}, tgdriver.ErrUnknownOutcome},
		{"corrupt", sqlite3.Error{Code: sqlite3.ErrCorrupt}, tgdriver.ErrUnknownOutcome},
	} {
		err := d.classifyCommit(c.err)
		if !errors.Is(err, c.want) || !errors.Is(err, tgdriver.ErrUnavailable) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if got, want := tgdriver.MayHaveApplied(err), c.want == tgdriver.ErrUnknownOutcome; got != want {
			t.Errorf("%s: MayHaveApplied = %v, want %v", c.name, got, want)
		}
		var se sqlite3.Error
		if !errors.As(err, &se) || se.Code != c.err.Code {
			t.Errorf("%s: the SQLite error is not kept: %v", c.name, err)
		}
	}
	if d.classifyCommit(nil) != nil {
		t.Error("no error classified as one")
	}
}
