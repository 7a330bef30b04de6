package taskgraph

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A rejected operation in a batch rolls back to its own savepoint; the others
// of the same batch commit.
func TestBatchIsolatesRejectedOperations(t *testing.T) {
	b := setup(t)
	var batches []int
	var mu sync.Mutex
	b.s.opts.OnBatch = func(n int, _ time.Duration, _ error) { mu.Lock(); batches = append(batches, n); mu.Unlock() }
	const n = 200
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			spec := NodeSpec{NodeID: fmt.Sprintf("n%d", i)}
			if i%2 == 1 {
				spec.DependsOn = []string{"missing"} // passes validation, fails in the transaction
			}
			_, results[i] = b.s.CreateTask(b.ctx, "wf", spec)
		}(i)
	}
	wg.Wait()
	for i, err := range results {
		if (i%2 == 1) != (err != nil) {
			t.Fatalf("op %d: err = %v", i, err)
		}
	}
	v, err := b.s.Workflow(b.ctx, "wf")
	if err != nil || len(v.Tasks) != n/2 {
		t.Fatalf("%d tasks stored, want %d (%v)", len(v.Tasks), n/2, err)
	}
	b.verify(t)
	mu.Lock()
	defer mu.Unlock()
	grouped := false
	for _, s := range batches {
		grouped = grouped || s > 1
	}
	t.Logf("batch sizes: %v", batches)
	if !grouped {
		t.Log("no batch held more than one operation this run (timing dependent)")
	}
}

// The crash test: a child process claims and completes tasks and prints each
// completion after the store acknowledged it; the parent kills it with SIGKILL
// mid-load. The database must reopen, pass integrity_check, hold every
// acknowledged completion, and verify its chain.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if os.Getenv("GE_CRASH_CHILD") != "" {
		t.Skip("running as the crash child")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]NodeSpec, 5000)
	for i := range nodes {
		nodes[i] = NodeSpec{NodeID: fmt.Sprintf("n%d", i)}
	}
	if _, err := s.CreateWorkflow(context.Background(), "crash", nodes); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), "GE_CRASH_CHILD="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[string]string{}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "ACK" {
				acked[f[1]] = f[2]
				if len(acked) == 150 {
					cmd.Process.Signal(syscall.SIGKILL)
					break
				}
			}
		}
		go func() {
			for sc.Scan() {
			}
		}()
		werr := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child was not killed by SIGKILL: %v (acked %d)", round, werr, len(acked))
		}
		s, err := Open(context.Background(), path, Options{})
		if err != nil {
			t.Fatalf("reopen after SIGKILL: %v", err)
		}
		res, err := s.Check(context.Background())
		if err != nil || !res.OK() {
			t.Fatalf("integrity after SIGKILL: %v %v", res.Integrity, err)
		}
		for id, owner := range acked {
			tk, err := s.Task(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if tk.State != StateCompleted || string(tk.Result) != strconv.Quote(owner) {
				t.Fatalf("round %d: acknowledged completion of %s lost: %s %s", round, id, tk.State, tk.Result)
			}
		}
		if _, err := s.VerifyHistory(context.Background()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		t.Logf("round %d: %d acknowledged completions survived SIGKILL", round, len(acked))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashChild is the child half of TestCrashKeepsAcknowledgedWrites.
func TestCrashChild(t *testing.T) {
	path := os.Getenv("GE_CRASH_CHILD")
	if path == "" {
		t.Skip("only runs as the child of TestCrashKeepsAcknowledgedWrites")
	}
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			for {
				c, ok, err := s.Claim(context.Background(), ClaimRequest{Owner: owner, Lease: time.Minute})
				if err != nil || !ok {
					return
				}
				if _, err := s.Complete(context.Background(), holder(c), json.RawMessage(strconv.Quote(owner))); err != nil {
					return
				}
				mu.Lock()
				fmt.Printf("ACK %s %s\n", c.Task.TaskID, owner)
				mu.Unlock()
			}
		}(fmt.Sprintf("child-%d", w))
	}
	wg.Wait()
}

func TestCloseAnswersQueuedAndRefusesNew(t *testing.T) {
	b := setup(t)
	b.create(t, "wf", "a")
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "b"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("create after close: %v", err)
	}
	// The WAL was checkpointed into the database file.
	if fi, err := os.Stat(b.path + "-wal"); err == nil && fi.Size() != 0 {
		t.Fatalf("WAL still holds %d bytes after Close", fi.Size())
	}
	db, err := sql.Open("sqlite3", "file:"+b.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM tasks`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("after close: %d tasks (%v)", n, err)
	}
}
