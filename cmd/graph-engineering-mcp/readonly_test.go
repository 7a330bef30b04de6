package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// readFileOrNil returns the content of path, or nil when it does not exist.
func readFileOrNil(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The read-only operator commands, run as the real binary beside a store
// that serves writes and a second connection holding a long read
// transaction (a long audit verify, db backup or sqlite3 shell): each exits
// without waiting for the reader and leaves the database file and its WAL
// byte for byte as they were, and between them the store keeps committing;
// at the end the store closes without waiting for the reader either.
func TestReadCommandsNeverWriteNorWaitForReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := builtBinary(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.db")
	// An hour: anything that waited for the reader would still be waiting
	// when the deadlines below fail the test.
	s, err := taskgraph.Open(ctx, path, taskgraph.Options{BusyTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done, err := s.CreateTask(ctx, "done", taskgraph.NodeSpec{NodeID: "only"})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := s.Claim(ctx, taskgraph.ClaimRequest{Owner: "w0", TaskID: done.Task.TaskID, Lease: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, holderOfClaim(cl), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	live, err := s.CreateWorkflow(ctx, "live", []taskgraph.NodeSpec{{NodeID: "build"}, {NodeID: "test", DependsOn: []string{"build"}}})
	if err != nil {
		t.Fatal(err)
	}

	// The reader's snapshot starts here.
	rdb, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	reader, err := rdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := reader.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	var seen int
	if err := reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks`).Scan(&seen); err != nil || seen != 3 {
		t.Fatalf("reader: %d tasks, %v", seen, err)
	}
	// Committed after the snapshot, so the WAL holds frames the reader does
	// not see and no checkpoint can finish without waiting for it.
	w, _, err := s.Claim(ctx, taskgraph.ClaimRequest{Owner: "w1", TaskID: live[0].Task.TaskID, Lease: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	backup := filepath.Join(t.TempDir(), "backup.db")
	for _, args := range [][]string{
		{"tasks", "list"},
		{"tasks", "list", "--json"},
		{"tasks", "show", w.Task.TaskID},
		{"tasks", "show", w.Task.TaskID, "--json"},
		{"workflow", "show", "live"},
		{"workflow", "show", "live", "--format", "dot"},
		{"workflow", "watch", "done", "--interval", "10ms"},
		{"audit", "verify"},
		{"audit", "verify", "--json"},
		{"audit", "head"},
		{"audit", "export"},
		{"db", "check"},
		{"db", "check", "--json"},
		{"db", "backup", backup},
	} {
		name := strings.Join(args, " ")
		db, wal := readFileOrNil(t, path), readFileOrNil(t, path+"-wal")
		if wal == nil {
			t.Fatal("no WAL beside the database")
		}
		cctx, cancel := testwait.Bound(t, ctx) // a command that waited for the reader would wait until the test's deadline
		cmd := exec.CommandContext(cctx, bin, append(args, "--database", path)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		timedOut := cctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("%s did not exit while the reader held its transaction: it waits for readers\n%s", name, stderr.String())
		}
		if err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", name, err, stdout.String(), stderr.String())
		}
		if !bytes.Equal(db, readFileOrNil(t, path)) {
			t.Errorf("%s wrote the database file", name)
		}
		if !bytes.Equal(wal, readFileOrNil(t, path+"-wal")) {
			t.Errorf("%s wrote the WAL", name)
		}
		switch name {
		case "tasks list":
			if !strings.Contains(lineWith(t, stdout.String(), w.Task.TaskID), "claimed") {
				t.Errorf("tasks list does not show the live claim:\n%s", stdout.String())
			}
		case "db check":
			if !strings.Contains(stdout.String(), "integrity:  ok\n") || !strings.Contains(stdout.String(), "not checkpointed") {
				t.Errorf("db check:\n%s", stdout.String())
			}
		}
		// The store commits while the reader holds its transaction.
		if _, err := s.Heartbeat(ctx, holderOfClaim(w), 15*time.Minute); err != nil {
			t.Fatalf("heartbeat after %s: %v", name, err)
		}
	}
	bs, err := taskgraph.OpenReadOnly(ctx, backup, taskgraph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := bs.CountByState(ctx); err != nil || n[taskgraph.StateClaimed] != 1 || n[taskgraph.StateCompleted] != 1 {
		t.Errorf("the backup: %v %v", n, err)
	}
	bs.Close()

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	if err := testwait.Recv(t, "the store's Close to return while the reader held its transaction (it must not wait for readers)", closed); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The reader still holds its old snapshot: nothing waited for it to end.
	if err := reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks`).Scan(&seen); err != nil || seen != 3 {
		t.Fatalf("reader after close: %d tasks, %v", seen, err)
	}
}

// A read command on a database whose schema is older than the binary's
// refuses it, naming the path and saying what to do, and does not migrate it.
func TestReadCommandsRefuseAnOlderSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE schema_version (singleton INTEGER PRIMARY KEY, version INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := readFileOrNil(t, path)
	e := &env{t: t, path: path, ctx: context.Background()}
	r := e.cli("", "tasks", "list").want(t, exitFailure)
	if !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, "older than this binary") || !strings.Contains(r.stderr, "serve") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	if !bytes.Equal(before, readFileOrNil(t, path)) {
		t.Fatal("a refused read command changed the database")
	}
}
