package taskgraph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/fsfault"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// The health tests drive real child processes (this test binary re-run in
// a helper mode) for what only another process can do to the database:
// open it after its -shm was removed, reopen it fresh.
const (
	childModeEnv = "TASKGRAPH_HEALTH_CHILD"
	childDBEnv   = "TASKGRAPH_HEALTH_DB"
)

// TestHealthChild is not a test: it is the body of the helper processes.
func TestHealthChild(t *testing.T) {
	mode := os.Getenv(childModeEnv)
	if mode == "" {
		t.Skip("helper process body; runs only when started by another test")
	}
	path := os.Getenv(childDBEnv)
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	switch mode {
	case "operator":
		// What the next operator command does: open, write, checkpoint, close.
		s, err := Open(ctx, path, Options{})
		if err != nil {
			fail(err)
		}
		if _, err := s.CreateTask(ctx, "operator", NodeSpec{NodeID: "after"}); err != nil {
			fail(err)
		}
		if _, err := s.Check(ctx); err != nil {
			fail(err)
		}
		if err := s.Close(); err != nil {
			fail(err)
		}
		fmt.Println("done")
	case "verify":
		// A fresh process: integrity, then every node id of workflow "load".
		s, err := Open(ctx, path, Options{})
		if err != nil {
			fail(err)
		}
		res, err := s.Check(ctx)
		if err != nil {
			fail(err)
		}
		ts, err := s.ListTasks(ctx, ListFilter{WorkflowID: "load", Limit: MaxTasksPerWorkflow})
		if err != nil {
			fail(err)
		}
		out := struct {
			Integrity []string
			Nodes     []string
			Operator  int
		}{Integrity: res.Integrity}
		for _, tk := range ts {
			out.Nodes = append(out.Nodes, tk.NodeID)
		}
		op, err := s.ListTasks(ctx, ListFilter{WorkflowID: "operator"})
		if err != nil {
			fail(err)
		}
		out.Operator = len(op)
		if err := s.Close(); err != nil {
			fail(err)
		}
		json.NewEncoder(os.Stdout).Encode(out)
	default:
		fail(fmt.Errorf("unknown mode %q", mode))
	}
	os.Exit(0)
}

func childCmd(t *testing.T, mode, path string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestHealthChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childDBEnv+"="+path)
	cmd.Stderr = &bytes.Buffer{}
	return cmd
}

// runChild runs a helper process to the end and returns its stdout.
func runChild(t *testing.T, mode, path string) []byte {
	t.Helper()
	cmd := childCmd(t, mode, path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", mode, err, cmd.Stderr)
	}
	return out
}

func wantUnavailable(t *testing.T, what string, err, sentinel error, reason string, retryable bool) {
	t.Helper()
	if !errors.Is(err, sentinel) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("%s: got %v, want an error matching %v and ErrUnavailable", what, err, sentinel)
	}
	r, retry, ok := UnavailableReason(err)
	if !ok || r != reason || retry != retryable {
		t.Fatalf("%s: UnavailableReason = %q, %v, %v; want %q, %v, true", what, r, retry, ok, reason, retryable)
	}
	if !strings.Contains(err.Error(), sentinel.Error()) {
		t.Fatalf("%s: message %q does not contain %q", what, err, sentinel)
	}
}

// chattr sets or clears the immutable flag; it skips the test where the
// tool or the filesystem does not support it.
func chattr(t *testing.T, flag string, paths ...string) {
	t.Helper()
	out, err := exec.Command("chattr", append([]string{flag}, paths...)...).CombinedOutput()
	if err != nil {
		if flag == "-i" {
			t.Errorf("chattr %s: %v %s", flag, err, out)
			return
		}
		t.Skipf("cannot make a file immutable here (chattr %s: %v %s)", flag, err, out)
	}
}

// A database file and -wal that became unwritable under a running store
// (an immutable file; root ignores file modes) make writes and the probe
// fail with ErrReadOnly, not an internal error; once writable again both
// succeed. The -shm is left alone: SQLite has it mapped, and an immutable
// mapping would crash the process.
func TestReadOnlyFilesFailWithErrReadOnly(t *testing.T) {
	b := setup(t)
	b.create(t, "wf", "a")
	files := []string{b.path, b.path + "-wal"}
	chattr(t, "+i", files...)
	cleared := false
	clear := func() {
		if !cleared {
			cleared = true
			chattr(t, "-i", files...)
		}
	}
	t.Cleanup(clear)

	_, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "b"})
	wantUnavailable(t, "create", err, ErrReadOnly, "read_only", false)
	wantUnavailable(t, "ready", b.s.Ready(b.ctx), ErrReadOnly, "read_only", false)

	clear()
	if err := b.s.Ready(b.ctx); err != nil {
		t.Fatalf("ready once writable: %v", err)
	}
	b.create(t, "wf", "b")
}

// A database that cannot be written is refused at Open, or by the first
// Ready after it, with ErrReadOnly: an immutable file (root ignores file
// modes) and a read-only mount of its folder.
func TestUnwritableDatabaseIsNotReady(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare makes the closed database at path unwritable and returns
		// the path to open it by.
		prepare func(t *testing.T, path string) string
	}{
		{"immutable file", func(t *testing.T, path string) string {
			chattr(t, "+i", path)
			t.Cleanup(func() { chattr(t, "-i", path) })
			return path
		}},
		{"read-only mount", func(t *testing.T, path string) string {
			return filepath.Join(fsfault.ReadOnly(t, filepath.Dir(path)), filepath.Base(path))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			s, err := Open(context.Background(), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateTask(context.Background(), "wf", NodeSpec{NodeID: "a"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			open := tc.prepare(t, path)
			s, err = Open(context.Background(), open, Options{})
			if err == nil {
				err = s.Ready(context.Background())
				s.Close()
			} else if !strings.Contains(err.Error(), open) {
				t.Errorf("Open: %q does not name %s", err, open)
			}
			wantUnavailable(t, "open and ready", err, ErrReadOnly, "read_only", false)
		})
	}
}

// Rule 7 under load: writers create tasks while the -shm is removed. The
// store notices, refuses every later write with ErrFilesReplaced, reports
// unready, logs the file, and closes without a checkpoint; the next operator
// process (which creates a new -shm and checkpoints) and then a fresh
// process find every acknowledged write and an intact database.
func TestRemovedShmUnderLoadLosesNoAcknowledgedWrite(t *testing.T) {
	running := testwait.Goroutines()
	logs := &testwait.Buffer{}
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(context.Background(), path, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const writers, perWriter = 8, 1000
	var (
		mu     sync.Mutex
		acked  []string
		errs   []error
		wg     sync.WaitGroup
		enough = make(chan struct{})
		once   sync.Once
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				node := fmt.Sprintf("w%d-%d", w, i)
				_, err := s.CreateTask(ctx, "load", NodeSpec{NodeID: node})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				acked = append(acked, node)
				if len(acked) == 200 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	<-enough
	if err := os.Remove(path + "-shm"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	if len(errs) != writers {
		t.Fatalf("%d of %d writers were refused; the others wrote %d tasks each after the -shm was removed", len(errs), writers, perWriter)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrFilesReplaced) {
			t.Fatalf("a writer got %v, want ErrFilesReplaced", err)
		}
	}
	_, err = s.CreateTask(ctx, "load", NodeSpec{NodeID: "late"})
	wantUnavailable(t, "late create", err, ErrFilesReplaced, "files_replaced", false)
	wantUnavailable(t, "ready", s.Ready(ctx), ErrFilesReplaced, "files_replaced", false)
	if !strings.Contains(logs.String(), "file="+path+"-shm") {
		t.Fatalf("no log line names %s-shm:\n%s", path, logs)
	}

	// The next operator command, while the server still has the database
	// open: a new -shm, a write, a checkpoint.
	runChild(t, "operator", path)
	if err := s.Close(); !errors.Is(err, ErrFilesReplaced) {
		t.Fatalf("Close: %v, want ErrFilesReplaced (the server must not report a clean close)", err)
	}
	testwait.Abandon(running, "Close leaves the connections of replaced database files open on purpose (tgsqlite: a checkpoint would write into files that are no longer the database's)")

	var got struct {
		Integrity []string
		Nodes     []string
		Operator  int
	}
	if err := json.Unmarshal(runChild(t, "verify", path), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Integrity) != 1 || got.Integrity[0] != "ok" {
		t.Fatalf("integrity after the -shm was removed: %v", got.Integrity)
	}
	present := map[string]bool{}
	for _, n := range got.Nodes {
		present[n] = true
	}
	for _, n := range acked {
		if !present[n] {
			t.Fatalf("acknowledged task %s is missing after reopening (%d acknowledged, %d present)", n, len(acked), len(got.Nodes))
		}
	}
	if got.Operator != 1 {
		t.Fatalf("the operator's task is missing: %d", got.Operator)
	}
	t.Logf("%d writes acknowledged before the store tripped, %d tasks present", len(acked), len(got.Nodes))
}

// Removing the -wal or replacing the database file trips the store the same
// way, even with no write in flight: Ready notices, and the log names the
// file.
func TestReplacedFilesTripTheStore(t *testing.T) {
	for _, tc := range []struct {
		name, suffix string
		do           func(path string) error
	}{
		{"removed wal", "-wal", func(p string) error { return os.Remove(p + "-wal") }},
		{"replaced database", "", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p+".new", b, 0o600); err != nil {
				return err
			}
			return os.Rename(p+".new", p)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			running := testwait.Goroutines()
			logs := &testwait.Buffer{}
			path := filepath.Join(t.TempDir(), "tasks.db")
			s, err := Open(context.Background(), path, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.CreateTask(ctx, "wf", NodeSpec{NodeID: "a"}); err != nil {
				t.Fatal(err)
			}
			if err := tc.do(path); err != nil {
				t.Fatal(err)
			}
			wantUnavailable(t, "ready", s.Ready(ctx), ErrFilesReplaced, "files_replaced", false)
			_, err = s.CreateTask(ctx, "wf", NodeSpec{NodeID: "b"})
			wantUnavailable(t, "create", err, ErrFilesReplaced, "files_replaced", false)
			if _, checkpoint := s.Check(ctx); checkpoint == nil {
				t.Fatal("a check (and its checkpoint) ran on files that are no longer the database's")
			}
			if !strings.Contains(logs.String(), "file="+path+tc.suffix+" ") {
				t.Fatalf("no log line names %s%s:\n%s", path, tc.suffix, logs)
			}
			if err := s.Close(); !errors.Is(err, ErrFilesReplaced) {
				t.Fatalf("Close: %v, want ErrFilesReplaced", err)
			}
			testwait.Abandon(running, "Close leaves the connections of replaced database files open on purpose (tgsqlite: a checkpoint would write into files that are no longer the database's)")
		})
	}
}

// An idle store notices a removed -shm by itself (the periodic check): it
// trips and logs the file before any write or Ready call arrives.
func TestIdleStoreNoticesRemovedShm(t *testing.T) {
	running := testwait.Goroutines()
	logs := &testwait.Buffer{}
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(context.Background(), path, Options{WatchInterval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + "-shm"); err != nil {
		t.Fatal(err)
	}
	// Poll the background loop's effect; nothing here waits for a lease or
	// asserts a speed.
	testwait.For(t, "the periodic check to log the removed -shm", func() bool {
		return strings.Contains(logs.String(), "file="+path+"-shm")
	})
	if err := s.Close(); !errors.Is(err, ErrFilesReplaced) {
		t.Fatalf("Close: %v, want ErrFilesReplaced", err)
	}
	testwait.Abandon(running, "Close leaves the connections of replaced database files open on purpose (tgsqlite: a checkpoint would write into files that are no longer the database's)")
}
