package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// The documented shutdown bounds (MCP.md §9). The tests check that the
// server exits, with the status and the reason of its bound, and log how
// long it took; they do not fail a slow exit on a loaded machine (only the
// test binary's deadline bounds the wait).
const (
	boundAfterEOF    = 40 * time.Second
	boundAfterSignal = 10 * time.Second
	pipeCapacity     = 64 << 10 // the largest default pipe buffer (Linux, macOS)
	floodLineBytes   = 1024
)

// rawServer is the binary with both pipe ends in the test's hands.
type rawServer struct {
	cmd    *exec.Cmd
	in     *os.File // stdin, write end
	out    *os.File // stdout, read end
	stderr *testwait.Buffer
	db     string
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

func startRaw(t *testing.T) *rawServer {
	t.Helper()
	db := filepath.Join(t.TempDir(), "tasks.db")
	cmd := exec.Command(builtBinary(t), "serve", "--database", db)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{cmd: cmd, in: inW, out: outR, stderr: &testwait.Buffer{}, db: db, exited: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.exited
		inW.Close()
		outR.Close()
	})
	return s
}

// floodLine is a tools/list call padded to floodLineBytes.
func floodLine(id int) string {
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{%s,"pad":"`, id, modernMetaJSON)
	return head + strings.Repeat("x", floodLineBytes-len(head)-4) + `"}}` + "\n"
}

// flood writes n flood lines (ids from 1) and counts the writes completed.
func (s *rawServer) flood(n int) (written *atomic.Int64, done chan struct{}) {
	written, done = &atomic.Int64{}, make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			if _, err := s.in.WriteString(floodLine(i)); err != nil {
				return
			}
			written.Add(1)
		}
	}()
	return written, done
}

// stalled waits until the flood stops advancing (the server stopped
// reading) and fails if it wrote everything instead.
func stalled(t *testing.T, written *atomic.Int64, done chan struct{}, n int) int64 {
	t.Helper()
	last, since := written.Load(), time.Now()
	for time.Since(since) < time.Second {
		select {
		case <-done:
			if written.Load() == int64(n) {
				t.Fatalf("the server read all %d requests (%d MB) while the client read no answer", n, n*floodLineBytes>>20)
			}
		case <-time.After(50 * time.Millisecond):
		}
		if v := written.Load(); v != last {
			last, since = v, time.Now()
		}
	}
	return last
}

func vmRSS(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.Join(strings.Fields(line)[1:], " ")
		}
	}
	return "unknown"
}

// exitAfter waits for the server to exit, whose documented bound is d, and
// returns how long it took and its exit error. A server that never exits
// fails the test at its deadline.
func (s *rawServer) exitAfter(t *testing.T, d time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	select {
	case <-s.exited:
		took := time.Since(start)
		if took > d {
			t.Logf("the server exited %s after the event, past its documented %s bound (a loaded machine?)", took.Round(time.Millisecond), d)
		}
		return took, s.err
	case <-testwait.Context(t).Done():
		t.Fatalf("the server never exited (its documented bound is %s)\nstderr:\n%s", d, s.stderr.String())
	}
	return 0, nil
}

// checkClosedCleanly asserts the database was checkpointed and closed.
func checkClosedCleanly(t *testing.T, path string) {
	t.Helper()
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() != 0 {
		t.Errorf("WAL holds %d bytes: the database was not closed cleanly", fi.Size())
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity %q %v", ok, err)
	}
}

// A client that writes thousands of requests and never reads: the server
// reads only what its pending answers allow, then every request is
// answered once the client reads.
func TestStdioFloodWithoutReadingIsBounded(t *testing.T) {
	t.Parallel()
	s := startRaw(t)
	out := bufio.NewReaderSize(s.out, 1<<20)
	// One answer first: its size says how many fit in the stdout pipe.
	s.in.WriteString(floodLine(0))
	first, err := out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	const n = 4000 // 4 MB of requests
	written, done := s.flood(n)
	got := stalled(t, written, done, n)
	// Read by the server: answers in the stdout pipe + calls in flight + one
	// line ahead; still in stdin: the pipe and the server's 64 KiB buffer;
	// plus a partial line at each end.
	bound := int64(pipeCapacity/len(first) + mcpadapter.MaxStdioInFlight + 1 + 2*pipeCapacity/floodLineBytes + 2)
	t.Logf("stalled after %d of %d requests (bound %d); server VmRSS %s", got, n, bound, vmRSS(s.cmd.Process.Pid))
	if got > bound {
		t.Fatalf("the client wrote %d requests before the server stopped reading; want at most %d", got, bound)
	}
	seen := map[float64]bool{}
	for range n {
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %d answers: %v\n%s", len(seen), err, s.stderr.String())
		}
		var m struct {
			ID     float64         `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(line, &m) != nil || m.Result == nil || seen[m.ID] {
			t.Fatalf("answer %d: %.200s", len(seen), line)
		}
		seen[m.ID] = true
	}
	<-done
	s.in.Close()
	if _, err := s.exitAfter(t, boundAfterEOF); err != nil {
		t.Fatalf("exit: %v\n%s", err, s.stderr.String())
	}
}

// End of input while the client never reads stdout: the pending answers
// stall, the client counts as gone, and the server exits 1 within the
// end-of-input bound, its database closed cleanly.
func TestStdioEOFWithUnreadStdoutEndsWithinBound(t *testing.T) {
	t.Parallel()
	s := startRaw(t)
	const n = 4000
	written, done := s.flood(n)
	stalled(t, written, done, n)
	s.in.Close() // also ends the blocked flood
	took, err := s.exitAfter(t, boundAfterEOF)
	t.Logf("exited %s after end of input: %v", took, err)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
		t.Fatalf("exit after %s: %v, want exit code %d\n%s", took, err, exitFailure, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "stopped reading stdout") {
		t.Errorf("stderr does not say why:\n%s", s.stderr.String())
	}
	checkClosedCleanly(t, s.db)
}

// SIGTERM while the client never reads stdout: the server exits 0 within
// the signal bound, its database closed cleanly.
func TestStdioSIGTERMWithUnreadStdoutEndsWithinBound(t *testing.T) {
	t.Parallel()
	s := startRaw(t)
	const n = 4000
	written, done := s.flood(n)
	stalled(t, written, done, n)
	s.cmd.Process.Signal(syscall.SIGTERM)
	took, err := s.exitAfter(t, boundAfterSignal)
	t.Logf("exited %s after SIGTERM: %v", took, err)
	if err != nil {
		t.Fatalf("exit %s after SIGTERM: %v\n%s", took, err, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "database closed cleanly") {
		t.Errorf("stderr lacks the clean-close log:\n%s", s.stderr.String())
	}
	checkClosedCleanly(t, s.db)
}

// A client that closes its end of stdout: the server is not killed by
// SIGPIPE; it stops as at end of input, says why, closes the database
// cleanly and exits 0.
func TestStdioClosedStdoutExitsCleanly(t *testing.T) {
	t.Parallel()
	s := startRaw(t)
	create := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"n%d"},%s}}`+"\n", id, id, modernMetaJSON)
	}
	s.in.WriteString(create(1))
	if line, err := bufio.NewReader(s.out).ReadString('\n'); err != nil || !strings.Contains(line, `"result"`) {
		t.Fatalf("create: %q %v", line, err)
	}
	s.out.Close()
	s.in.WriteString(create(2) + create(3))
	took, err := s.exitAfter(t, boundAfterEOF)
	if err != nil {
		t.Fatalf("exit %s after the client closed stdout: %v (state %v)\n%s", took, err, s.cmd.ProcessState, s.stderr.String())
	}
	for _, want := range []string{"closed stdout (broken pipe)", "database closed cleanly"} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, s.stderr.String())
		}
	}
	checkClosedCleanly(t, s.db)
	db, _ := sql.Open("sqlite3", "file:"+s.db+"?mode=ro")
	defer db.Close()
	var count int
	if err := db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE workflow_id = 'w'`).Scan(&count); err != nil || count < 1 || count > 3 {
		t.Fatalf("%d tasks (%v): the first create must be stored, later ones finish or are cancelled", count, err)
	}
}
